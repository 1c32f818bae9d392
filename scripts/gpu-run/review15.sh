#!/usr/bin/env bash
# Audit 2026-11-28c (held-out review of session 15): the GPU half of G15-3, the precise
# `f32::tanh` on a GPU (tests/gpu_g15.rs).
#
# Stage on the build machine, from the repository root (a folder git ignores):
#   scripts/gpu-run/review15.sh stage .device-bin/s15-review
# (builds `cargo test --release -p ferrocuda-main --test gpu_g15 --no-run`, about 1-3 min warm)
# then on the GPU machine (about 10 s on an H100/H200; carry the folder):
#   bash .device-bin/s15-review/run-review15.sh
# Output in $OUT/review15.txt (or ./out/review15.txt). Expect:
#   "G15-3 gpu: tanh worst X ulp at ... over 4210714 inputs; tanh(-0) keeps its sign" with X
#   at most 4 (the module table's bound; the formula alone is 1.81 ulp, the SFU's ex2/rcp
#   add to it), and "test result: ok. 2 passed" (the cpu_ twin runs too).
#   Before the G15-3 fix the test fails with "the result's sign is not the input's (G15-3):
#   tanh(-0e0) = 0e0 (0x00000000)".
# The summary line at the end: PASS or FAIL and the worst ulp.
set -euo pipefail
case "${1:-}" in
stage)
  root=$(cd "$(dirname "$0")/../.." && pwd)
  dest=${2:?usage: review15.sh stage <dest>}
  cd "$root"
  mkdir -p "$dest"
  exe=$(cargo test --release -p ferrocuda-main --test gpu_g15 --no-run --message-format=json 2>/dev/null |
    scripts/gpu-run/cargo-executable.py gpu_g15)
  cp "$exe" "$dest/gpu_g15"
  (cd "$dest" && xz -T0 -6 -f gpu_g15)
  cp "$0" "$dest/run-review15.sh"
  echo "staged $dest/gpu_g15.xz and $dest/run-review15.sh"
  ;;
*)
  here=$(cd "$(dirname "$0")" && pwd)
  out=${OUT:-$here/out}
  mkdir -p "$out"
  log="$out/review15.txt"
  bin=$here/gpu_g15
  [ -x "$bin" ] || { xz -dkc "$here/gpu_g15.xz" > "$bin" && chmod +x "$bin"; }
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$log" 2>&1 || true
  set +e
  REQUIRE_GPU=1 RUST_BACKTRACE=0 timeout -k 2 55 "$bin" --nocapture --test-threads=1 >> "$log" 2>&1
  rc=$?
  set -e
  cat "$log"
  worst=$(grep -o 'G15-3 gpu: tanh worst [0-9.]* ulp' "$log" || true)
  if [ $rc -eq 0 ]; then echo "review15 PASS ($worst)"; else echo "review15 FAIL (exit $rc; $worst)"; fi
  exit $rc
  ;;
esac
