#!/usr/bin/env bash
# Builds and tests templates/kernel-crate + templates/host-crate the way a user would use them:
# copied outside this workspace, with the ferrocuda dependencies pointed at this checkout, run
# on the CPU executor (no GPU needed). It keeps the template (and the README's "Your own kernel
# crate" snippets taken from it) from rotting.
#
# Needs the device toolchain (scripts/install-device-toolchain.sh): the kernel crate's build
# script compiles it to PTX. CARGO_TARGET_DIR defaults to this checkout's target/, so the
# ferrocuda crates already built there are reused; KEEP=1 keeps the temporary directory.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/ferrocuda-template.XXXXXX")
if [ "${KEEP:-0}" = 1 ]; then echo "check-template: keeping $work"; else trap 'rm -rf "$work"' EXIT; fi
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"

cp -r "$root/templates/kernel-crate" "$root/templates/host-crate" "$work/"

# `ferrocuda-x = "0.1"` (what a user writes once the crates are on crates.io) becomes
# `ferrocuda-x = { version = "0.1", path = "<checkout>/<dir>" }`.
declare -A dirs=([ferrocuda]=ferrocuda [ferrocuda-device]=device [ferrocuda-builder]=builder [ferrocuda-host]=host [ferrocuda-macros]=macros [ferrocuda-types]=types)
for manifest in "$work"/kernel-crate/Cargo.toml "$work"/host-crate/Cargo.toml; do
  for crate in "${!dirs[@]}"; do
    sed -i -E "s|^${crate} = \"([^\"]+)\"|${crate} = { version = \"\\1\", path = \"$root/${dirs[$crate]}\" }|" "$manifest"
  done
  if grep -nE '^ferrocuda[a-z-]* = "' "$manifest"; then
    echo "check-template: a ferrocuda dependency in $manifest was not rewritten" >&2
    exit 1
  fi
done
# Start from this workspace's lock file: the same dependency versions, no new resolution.
cp "$root/Cargo.lock" "$work/host-crate/Cargo.lock"
cp "$root/Cargo.lock" "$work/kernel-crate/Cargo.lock"

cd "$work/host-crate"
echo "check-template: building and testing in $work (target dir $CARGO_TARGET_DIR)"
cargo test --release
cargo run --release
