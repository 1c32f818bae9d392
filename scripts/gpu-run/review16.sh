#!/usr/bin/env bash
# Held-out review of session 16 (audit/2026-11-28d/FINDINGS-review.md): the GPU repros of
# G16R-1..12 and one probe (host/tests/gpu_g16r.rs; host crate only, the kernels are inline PTX).
#
# Stage on the build machine, from the repository root (a folder git ignores):
#   scripts/gpu-run/review16.sh stage .device-bin/s16-review
# (builds `cargo test --release -p ferrocuda-host --test gpu_g16r --no-run`, seconds warm)
# then on the GPU machine (about 5 s on an H100/H200 with the fixes; up to about 30 s before them,
# when the two deadlock repros run into their 10 s deadlines; carry the folder):
#   bash .device-bin/s16-review/run-review16.sh
# Output in $OUT/review16.txt (or ./out/review16.txt). Expect "test result: ok. 13 passed" and:
#   G16R-1: ... with the graph alive gave back 0 MiB   (then: after the graph's drop 256 MiB came back)
#   G16R-2: ... after the failed capture and the module's drop 256 MiB came back
#   G16R-3: Context::synchronize ...: Ok(())
#   G16R-4: synchronize returned Ok(())                G16R-5: wait_event returned Ok(())
#   G16R-6: ... on the forked stream Some(Err(ModuleNotLoadedInCapture ...
#   G16R-7: Context::synchronize ...: Ok(()); ... an event dropped in a callback ...: deferred 0
#   G16R-8: fork of the owner's stream Err(ForkOfBorrowedStream ...); ... 1024 of 1024 bytes filled
#   G16R-10: ... Stream::capture gave Err(CaptureEndedElsewhere); the other code's end Ok(Ok(1))
#   G16R-11: a host copy after give_up_on_work read 0xdead after ~300 ms
#   G16R-12: ... panicked (refused) ...; A's kernel read 0x0
#   probe: ... capturing after it (origin, forked) (Ok(false), Ok(false)) ...
# The summary line at the end: PASS, or FAIL with the failed tests named.
# Staging and the run are scripts/gpu-run/test-repro.sh's (the staged run-review16.sh is a copy of it).
set -euo pipefail
case "${1:-}" in
stage)
  dest=${2:?usage: review16.sh stage <dest>}
  exec "$(dirname "$0")/test-repro.sh" stage review16 ferrocuda-host gpu_g16r 58 "$dest"
  ;;
*)
  echo "usage: review16.sh stage <dest>; then, on the GPU machine, bash <dest>/run-review16.sh" >&2
  exit 2
  ;;
esac
