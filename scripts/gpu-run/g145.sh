#!/usr/bin/env bash
# GPU check of session 15's G14-5 / G14R-4 work (audit/2026-11-28b: the capture check and the
# queuing are one critical section; a capture belongs to the `Stream` value that began it).
#
# Two modes, from the repository root:
#   scripts/gpu-run/g145.sh --stage <dest>   # build machine: build the four test binaries and
#                                            # copy them, xz-compressed, to <dest> (a folder git
#                                            # ignores, e.g. .device-bin/g145; about 15 MiB, fits
#                                            # the run tool's carry), with this script beside them
#   bash scripts/gpu-run/g145.sh [<bindir>]  # GPU machine: run them from <bindir> (default
#                                            # .device-bin/g145; .xz files are unpacked there
#                                            # first); <bindir> may also be the bin/
#                                            # folder of scripts/gpu-run/stage.sh's bins.tar.xz,
#                                            # whose test binaries have the same names
# The build (what --stage runs; the binaries are target/release/deps/<name>-<hash>):
#   cargo test --release --test gpu_g14 --test gpu_host_seams --no-run
#   cargo test --release -p ferrocuda-host --test gpu_g14r --no-run
#   cargo test --release -p ferrocuda-kernels --test gpu_kernels_lib --no-run
# About 30-40 s on one H100/H200 (gpu_g14's two 3 s races, gpu_host_seams' races and 300 ms
# spins, the sm_90 GEMM race). Output in $OUT/g145.txt (or <bindir>/out/g145.txt).
#
# Expected (PASS): every binary "test result: ok", 0 failed; in particular
# - gpu_g14 `g14_5_a_launch_from_another_thread_is_never_recorded_silently_into_a_capture ... ok`
#   (no longer ignored) with "G14-5: N launches returned Ok, A were refused (capture seen), B
#   refused (capture began or ended between the check and the queuing); the capturing thread's
#   G graphs hold 0 nodes it never queued; 0 captures failed" (session 14, before the fix:
#   50k-58k nodes in 311k-353k graphs; B > 0 shows the closed window being hit);
# - gpu_g14 `g14r_4_another_handle_on_the_capturing_thread_is_refused_not_recorded ... ok`;
# - gpu_g14r: the two G14R-1 tests ok (the fork/join rules under the new owner);
# - gpu_host_seams: s1 and p2 races ok ("0 graphs with a node, 0 failed"), the s9 fork/join ok;
# - gpu_kernels_lib (only its `s1_` test): "s1 hopper_gemm_bf16: ... 0 graphs with a node, 0
#   failed" on sm_90.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
names=(gpu_g14 gpu_host_seams gpu_g14r gpu_kernels_lib)

if [[ ${1:-} == --stage ]]; then
  dest=${2:?usage: g145.sh --stage <dest>}
  root=$(cd "$here/../.." && pwd)
  cd "$root" || exit 1
  mkdir -p "$dest"
  executable() { # package, test target
    cargo test --release -p "$1" --test "$2" --no-run --message-format=json 2>/dev/null |
      scripts/gpu-run/cargo-executable.py "$2"
  }
  set -e
  cp "$(executable ferrocuda-main gpu_g14)" "$dest/gpu_g14"
  cp "$(executable ferrocuda-main gpu_host_seams)" "$dest/gpu_host_seams"
  cp "$(executable ferrocuda-host gpu_g14r)" "$dest/gpu_g14r"
  cp "$(executable ferrocuda-kernels gpu_kernels_lib)" "$dest/gpu_kernels_lib"
  # xz: the run tool carries at most 64 MiB (78 MiB uncompressed, about 15 MiB compressed).
  (cd "$dest" && xz -T0 -6 -f "${names[@]}")
  cp "$here/g145.sh" "$dest/g145.sh"
  git rev-parse HEAD > "$dest/commit.txt"
  echo "staged ${names[*]} of $(cat "$dest/commit.txt") in $dest ($(du -sh "$dest" | cut -f1))"
  exit 0
fi

bindir=${1:-.device-bin/g145}
bindir=$(cd "$bindir" && pwd) || { echo "g145: no folder $bindir"; exit 2; }
for name in "${names[@]}"; do
  if [[ -f "$bindir/$name.xz" && ! -x "$bindir/$name" ]]; then xz -dkf "$bindir/$name.xz" && chmod +x "$bindir/$name"; fi
done
out=${OUT:-$bindir/out}
mkdir -p "$out"
log="$out/g145.txt"
: > "$log"
export REQUIRE_GPU=1 RUST_BACKTRACE=1
status=()
run() { # name, timeout, args...
  local name=$1 limit=$2
  shift 2
  if [[ ! -x "$bindir/$name" ]]; then
    echo "== $name: MISSING in $bindir" | tee -a "$log"
    status+=("$name MISSING")
    return
  fi
  echo "== $name $*" | tee -a "$log"
  local start=$SECONDS
  (cd "$bindir" && timeout "$limit" "./$name" --test-threads=1 --nocapture "$@") >> "$log" 2>&1
  local rc=$?
  local took=$((SECONDS - start))
  if [[ $rc -eq 0 ]]; then status+=("$name PASS (${took}s)"); else status+=("$name FAIL rc=$rc (${took}s)"); fi
}
run gpu_g14 60
run gpu_g14r 30
run gpu_host_seams 60
run gpu_kernels_lib 60 s1_
{
  echo "== figures"
  grep -E "^G14-5:|^G14R-4|^G14R-1|^s1 |^s1 threads|^p2 threads|test result" "$log"
  echo "== summary"
  printf '%s\n' "${status[@]}"
  if printf '%s\n' "${status[@]}" | grep -qv PASS; then echo "g145: FAIL"; else echo "g145: PASS"; fi
} | tee -a "$log"
