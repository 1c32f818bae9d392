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

# A checkout inside the user's own workspace (README, "A checkout inside your own workspace"):
# cargo makes ferrocuda's crates members of that workspace and fails ("error inheriting
# `edition`") unless the workspace excludes the checkout. Both halves are checked with `cargo
# metadata` (nothing is compiled); the checkout is linked in, as a clone would lie there.
outer="$work/outer"
mkdir -p "$outer/app/src"
ln -s "$root" "$outer/ferrocuda"
printf '[workspace]\nmembers = ["app"]\nexclude = ["ferrocuda"]\nresolver = "3"\n' > "$outer/Cargo.toml"
printf '[package]\nname = "app"\nversion = "0.1.0"\nedition = "2024"\n\n[dependencies]\nferrocuda-types = { path = "../ferrocuda/types" }\n' > "$outer/app/Cargo.toml"
echo 'fn main() {}' > "$outer/app/src/main.rs"
cp "$root/Cargo.lock" "$outer/Cargo.lock"
(cd "$outer/app" && cargo metadata --format-version 1 --offline > /dev/null) ||
  { echo "check-template: a checkout excluded from the user's workspace does not load" >&2; exit 1; }
sed -i '/^exclude/d' "$outer/Cargo.toml"
if (cd "$outer/app" && cargo metadata --format-version 1 --offline > /dev/null 2> "$work/nested.err"); then
  echo "check-template: a nested checkout loads without \`exclude\`: update the README's note" >&2
  exit 1
fi
grep -q "error inheriting \`edition\`" "$work/nested.err" ||
  { echo "check-template: a nested checkout fails otherwise than the README says:" >&2; cat "$work/nested.err" >&2; exit 1; }
echo "check-template: a checkout inside the user's workspace loads with \`exclude\` and fails as documented without"

cd "$work/host-crate"
echo "check-template: building and testing in $work (target dir $CARGO_TARGET_DIR)"
cargo test --release
cargo run --release
