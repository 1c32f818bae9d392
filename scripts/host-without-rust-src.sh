#!/usr/bin/env bash
# Puts this machine in the state of issue 28: the host toolchain (the one rust-toolchain.toml
# picks) WITHOUT rust-src, and the kernels built by another toolchain that has it. That is what
# a new user has when rustup's default profile installed the host toolchain (no rust-src) and
# the install script took Debian's rustc-web for the device build. rustc prints the standard
# library's source lines in its errors only when the host toolchain has rust-src, so tests that
# compare compiler output must pass in both states.
#
#   exports=$(scripts/host-without-rust-src.sh) && eval "$exports"
#
# It prints the `export` line the device build then needs (nothing when a Debian or rustup
# nightly toolchain with rust-src already serves, which the builder finds on its own), and on
# stderr what it did. When the host toolchain is the only one with rust-src, its sysroot is
# first copied (hard links, no download) to $FERROCUDA_DEVICE_TOOLCHAIN_COPY
# (default /opt/ferrocuda-device-toolchain), which then builds the kernels through
# FERROCUDA_DEVICE_RUSTC. `rustup component add rust-src` undoes the removal.
set -euo pipefail
cd "$(dirname "$0")/.."   # rustup picks this repository's toolchain (rust-toolchain.toml) here
say() { printf 'host-without-rust-src: %s\n' "$*" >&2; }
has_src() { [ -f "$1/lib/rustlib/src/rust/library/core/src/lib.rs" ]; }

host_sysroot=$(readlink -f "$(rustc --print sysroot)")
host_toolchain=$(rustup show active-toolchain 2>/dev/null) || host_toolchain=""
host_toolchain=${host_toolchain%% *}
if ! has_src "$host_sysroot"; then
  say "the host toolchain ($(rustc --version), $host_sysroot) already has no rust-src"
else
  other=""
  # Debian's counts only when the builder would take it (1.95 or newer; Debian 12's main
  # archive has 1.85).
  if [ -x /usr/bin/rustc ] && has_src /usr && [[ $(/usr/bin/rustc --version) =~ ^rustc\ 1\.([0-9]+)\. ]] &&
    [ "${BASH_REMATCH[1]}" -ge 95 ]; then other="Debian's $(/usr/bin/rustc --version)"; fi
  if [ -z "$other" ] && nightly=$(rustup which --toolchain nightly rustc 2>/dev/null) &&
    has_src "$("$nightly" --print sysroot)"; then other="rustup nightly $("$nightly" --version)"; fi
  if [ -z "$other" ]; then
    copy=${FERROCUDA_DEVICE_TOOLCHAIN_COPY:-/opt/ferrocuda-device-toolchain}
    rm -rf "$copy"
    mkdir -p "$(dirname "$copy")"
    # Hard links (no space, no time) where the two paths share a file system, else a copy.
    cp -al "$host_sysroot" "$copy" 2>/dev/null || { rm -rf "$copy"; cp -a "$host_sysroot" "$copy"; }
    say "copied the host toolchain's sysroot with its rust-src to $copy"
    echo "export FERROCUDA_DEVICE_RUSTC=$copy/bin/rustc FERROCUDA_DEVICE_CARGO=$copy/bin/cargo"
    other="the copy at $copy"
  fi
  rustup component remove rust-src --toolchain "$host_toolchain" >&2
  has_src "$host_sysroot" && { say "rust-src is still in $host_sysroot"; exit 1; }
  say "removed rust-src from the host toolchain $host_toolchain; kernels build with $other"
fi
