#!/usr/bin/env bash
# Builds the kernels and runs the device-build tests (PTX shape, ptxas, toolchain errors) once
# with every device toolchain installed here: Debian's rustc-web, a rustup nightly with
# rust-src, and the host toolchain with rust-src (each through FERROCUDA_DEVICE_RUSTC).
# Prints one line per toolchain and fails if any failed. Run by .ci/run.
# tests/example_kernels_ptx.rs checks code quality (unrolling, no local memory) as tuned on the
# default toolchain's LLVM; for the other toolchains its failures are reported, not fatal.
set -euo pipefail
cd "$(dirname "$0")/.."
has_src() { [ -f "$1/lib/rustlib/src/rust/library/core/src/lib.rs" ]; }
toolchains=()
if [ -x /usr/bin/rustc ] && has_src /usr; then toolchains+=(/usr/bin/rustc); fi
if nightly=$(rustup which --toolchain nightly rustc 2>/dev/null) && has_src "$("$nightly" --print sysroot)"; then toolchains+=("$nightly"); fi
if sysroot=$(rustc --print sysroot 2>/dev/null) && has_src "$sysroot"; then toolchains+=("$sysroot/bin/rustc"); fi
[ ${#toolchains[@]} -gt 0 ] || { echo "no device toolchain installed"; exit 1; }
results=() failed=0
# A rustc older than the workspace's rust-version (Debian 12 main's rustc-web 1.85) is one the
# builder skips too: it is listed, not built with.
usable=()
for rustc in "${toolchains[@]}"; do
  version=$("$rustc" --version)
  if [[ $version =~ ^rustc\ 1\.([0-9]+)\. ]] && [ "${BASH_REMATCH[1]}" -lt 95 ]; then
    results+=("SKIP $version ($rustc): older than 1.95, the oldest rustc the device crates build with")
  else
    usable+=("$rustc")
  fi
done
[ ${#usable[@]} -gt 0 ] || { printf '%s\n' "${results[@]}"; echo "no device toolchain new enough"; exit 1; }
toolchains=("${usable[@]}")
log=/tmp/ferrocuda-toolchain-$$.log
for i in "${!toolchains[@]}"; do
  rustc=${toolchains[$i]}
  version=$("$rustc" --version)
  start=$(date +%s)
  if FERROCUDA_DEVICE_RUSTC=$rustc cargo test --release -q --test device_build --test device_build_params >"$log" 2>&1; then
    line="PASS $(( $(date +%s) - start )) s  $version ($rustc)"
  else
    failed=1; results+=("FAIL $(( $(date +%s) - start )) s  $version ($rustc)"); tail -n 40 "$log"; continue
  fi
  if ! FERROCUDA_DEVICE_RUSTC=$rustc cargo test --release -q --test example_kernels_ptx >"$log" 2>&1; then
    failures=$(grep -o '^    [a-z_]*$' "$log" | tr -d ' ' | sort -u | tr '\n' ' ')
    if [ "$i" = 0 ]; then failed=1; line="FAIL (code quality: $failures) ${line#PASS }"; tail -n 40 "$log"
    else line="$line; code-quality checks differ: $failures"; fi
  fi
  results+=("$line")
done
rm -f "$log"
printf '%s\n' "${results[@]}"
exit $failed
