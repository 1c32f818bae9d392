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
# Staging and the run are scripts/gpu-run/test-repro.sh's (the staged run-review16s.sh is a copy of it).
set -euo pipefail
case "${1:-}" in
stage)
  dest=${2:?usage: review16s.sh stage <dest>}
  exec "$(dirname "$0")/test-repro.sh" stage review16s ferrocuda-host gpu_g16s 58 "$dest"
  ;;
*)
  echo "usage: review16s.sh stage <dest>; then, on the GPU machine, bash <dest>/run-review16s.sh" >&2
  exit 2
  ;;
esac
