#!/usr/bin/env bash
# Held-out review of session 16 (audit/2026-11-28d/FINDINGS-review.md): the GPU repros of
# G16R-1..5 (host/tests/gpu_g16r.rs; host crate only, the one kernel is inline PTX).
#
# Stage on the build machine, from the repository root (a folder git ignores):
#   scripts/gpu-run/review16.sh stage .device-bin/s16-review
# (builds `cargo test --release -p ferrocuda-host --test gpu_g16r --no-run`, seconds warm)
# then on the GPU machine (about 5 s on an H100/H200 when fixed; 25 s when the two deadlock
# repros hang until their 10 s deadlines; carry the folder):
#   bash .device-bin/s16-review/run-review16.sh
# Output in $OUT/review16.txt (or ./out/review16.txt). Expect "test result: ok. 5 passed" and
# the lines "G16R-1: ... with the graph alive gave back 0 MiB" (then "after the graph's drop 256
# MiB came back"), "G16R-2: ... 256 MiB came back", "G16R-3: Context::synchronize ...: Ok(())",
# "G16R-4: synchronize returned Ok(())",
# "G16R-5: wait_event returned Ok(())". The summary line at the end: PASS or FAIL.
set -euo pipefail
case "${1:-}" in
stage)
  root=$(cd "$(dirname "$0")/../.." && pwd)
  dest=${2:?usage: review16.sh stage <dest>}
  cd "$root"
  mkdir -p "$dest"
  exe=$(cargo test --release -p ferrocuda-host --test gpu_g16r --no-run --message-format=json 2>/dev/null |
    python3 scripts/gpu-run/cargo-executable.py gpu_g16r)
  [ -n "$exe" ] || { echo "no gpu_g16r executable built" >&2; exit 1; }
  cp "$exe" "$dest/gpu_g16r"
  (cd "$dest" && xz -T0 -6 -f gpu_g16r)
  cp "$0" "$dest/run-review16.sh"
  echo "staged $dest/gpu_g16r.xz and $dest/run-review16.sh"
  ;;
*)
  here=$(cd "$(dirname "$0")" && pwd)
  out=${OUT:-$here/out}
  mkdir -p "$out"
  log="$out/review16.txt"
  bin=$here/gpu_g16r
  [ -x "$bin" ] || { xz -dkc "$here/gpu_g16r.xz" > "$bin" && chmod +x "$bin"; }
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$log" 2>&1 || true
  set +e
  REQUIRE_GPU=1 RUST_BACKTRACE=0 timeout -k 2 58 "$bin" --nocapture --test-threads=1 >> "$log" 2>&1
  rc=$?
  set -e
  cat "$log"
  failed=$(grep -E '^test g16r_.* FAILED$' "$log" | sed 's/^test //; s/ \.\.\. FAILED$//' | tr '\n' ' ' || true)
  if [ $rc -eq 0 ]; then echo "review16 PASS"; else echo "review16 FAIL (exit $rc; failed: ${failed:-?})"; fi
  exit $rc
  ;;
esac
