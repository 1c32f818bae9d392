#!/usr/bin/env bash
# Audit 2026-11-28c, held-out review 2 of session 15 (audit/2026-11-28c/FINDINGS-review2.md):
# the GPU repros of G15R-1, -2, -5, -6, -7 (host/tests/gpu_g15r.rs; host crate and cudarc only);
# session 16 (branch s16-sound) added three G15R-6 tests (the cross-stream class).
#
# Stage on the build machine, from the repository root (a folder git ignores):
#   scripts/gpu-run/review15b.sh stage .device-bin/s15-review2
# (builds `cargo test --release -p ferrocuda-host --test gpu_g15r --no-run`, seconds warm)
# then on the GPU machine (about 10 s on an H100/H200; carry the folder):
#   bash .device-bin/s15-review2/run-review15b.sh
# Output in $OUT/review15b.txt (or ./out/review15b.txt). Expect "test result: ok. 10 passed" and
# the lines "G15R-1: ... wait Err(EventRecordedInCapture ...) ... joined Ok(false)",
# "G15R-2: N waits Ok, M refused, 0 silent joins", "G15R-5: will_use_for Ok(Err(CaptureChangedWhileQueued ...",
# "G15R-6: nested door call returned Err(NestedDoorCall ...", "G15R-6 (two streams): Ok(Err(NestedDoorCall ..."
# (twice), "G15R-6 (end inside a joined stream's closure): Ok(Err(NestedDoorCall { operation: "Stream::end_capture" }));
# then Ok(Ok(..)); drop inside Ok(()), sync Ok(()), joined after Ok(false)", "G15R-6 (drop inside): Ok(()); sync Ok(()); deferred 0",
# "s16 (capture abandoned in a host callback): sync Ok(()); deferred 0",
# "s16 (stream call in a host callback): Err(CallInHostCallback { operation: \"inside a callback\" })", "G15R-7: fill Err(OrderingAfterCapture ...".
# The summary line at the end: PASS or FAIL.
# Staging and the run are scripts/gpu-run/test-repro.sh's (the staged run-review15b.sh is a copy of it).
set -euo pipefail
case "${1:-}" in
stage)
  dest=${2:?usage: review15b.sh stage <dest>}
  exec "$(dirname "$0")/test-repro.sh" stage review15b ferrocuda-host gpu_g15r 100 "$dest" '' 'G15R-2: .* silent joins'
  ;;
*)
  echo "usage: review15b.sh stage <dest>; then, on the GPU machine, bash <dest>/run-review15b.sh" >&2
  exit 2
  ;;
esac
