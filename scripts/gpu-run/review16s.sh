#!/usr/bin/env bash
# Third held-out review of session 16 (audit/2026-11-28d/FINDINGS-review3.md): the GPU repros of
# G16S-1..3 and G16S-5 (host/tests/gpu_g16s.rs; host crate only, the kernels are inline PTX).
#
# Stage on the build machine, from the repository root (a folder git ignores):
#   scripts/gpu-run/review16s.sh stage .device-bin/s16-review3
# (builds `cargo test --release -p ferrocuda-host --test gpu_g16s --no-run`, seconds warm)
# then on the GPU machine (about 3 s on an H100/H200 with the fixes; up to about 45 s before
# them, when a repro runs into its 20 s child deadline; carry the folder):
#   bash .device-bin/s16-review3/run-review16s.sh
# Output in $OUT/review16s.txt (or ./out/review16s.txt). Expect "test result: ok. 4 passed" and:
#   G16S-1: ... child status ... signal: 6 (SIGABRT) ... "dropped inside a stream host callback" (no UNORDERED line)
#   G16S-2: the main thread's load ...: Ok("PTX sm_50, JIT") after <time>; the callback's embedded_image: Err(CallInHostCallback ...)
#           (the load time says whether the driver's load waited for the callback: >= ~300 ms)
#   G16S-3: Stream::capture inside a destructor during an unwind: Ok("a graph")
#   G16S-5: the adopted context's work when its owner's object was dropped ...: Ok(()) on thread ...
# The summary line at the end: PASS, or FAIL with the failed tests named.
set -euo pipefail
case "${1:-}" in
stage)
  root=$(cd "$(dirname "$0")/../.." && pwd)
  dest=${2:?usage: review16s.sh stage <dest>}
  cd "$root"
  mkdir -p "$dest"
  exe=$(cargo test --release -p ferrocuda-host --test gpu_g16s --no-run --message-format=json 2>/dev/null |
    python3 scripts/gpu-run/cargo-executable.py gpu_g16s)
  [ -n "$exe" ] || { echo "no gpu_g16s executable built" >&2; exit 1; }
  cp "$exe" "$dest/gpu_g16s"
  (cd "$dest" && xz -T0 -6 -f gpu_g16s)
  cp "$0" "$dest/run-review16s.sh"
  echo "staged $dest/gpu_g16s.xz and $dest/run-review16s.sh"
  ;;
*)
  here=$(cd "$(dirname "$0")" && pwd)
  out=${OUT:-$here/out}
  mkdir -p "$out"
  log="$out/review16s.txt"
  bin=$here/gpu_g16s
  [ -x "$bin" ] || { xz -dkc "$here/gpu_g16s.xz" > "$bin" && chmod +x "$bin"; }
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$log" 2>&1 || true
  set +e
  REQUIRE_GPU=1 RUST_BACKTRACE=0 timeout -k 2 58 "$bin" --nocapture --test-threads=1 >> "$log" 2>&1
  rc=$?
  set -e
  cat "$log"
  failed=$(sed -n '/^failures:$/,/^test result/p' "$log" | grep -E '^    g16s_' | tr -d ' ' | tr '\n' ' ' || true)
  if [ $rc -eq 0 ]; then echo "review16s PASS"; else echo "review16s FAIL (exit $rc; failed: ${failed:-?})"; fi
  exit $rc
  ;;
esac
