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
set -euo pipefail
case "${1:-}" in
stage)
  root=$(cd "$(dirname "$0")/../.." && pwd)
  dest=${2:?usage: review15b.sh stage <dest>}
  cd "$root"
  mkdir -p "$dest"
  exe=$(cargo test --release -p ferrocuda-host --test gpu_g15r --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
    try: m=json.loads(l)
    except ValueError: continue
    if m.get("reason")=="compiler-artifact" and m.get("executable") and m["target"]["name"]=="gpu_g15r": print(m["executable"])')
  cp "$exe" "$dest/gpu_g15r"
  (cd "$dest" && xz -T0 -6 -f gpu_g15r)
  cp "$0" "$dest/run-review15b.sh"
  echo "staged $dest/gpu_g15r.xz and $dest/run-review15b.sh"
  ;;
*)
  here=$(cd "$(dirname "$0")" && pwd)
  out=${OUT:-$here/out}
  mkdir -p "$out"
  log="$out/review15b.txt"
  bin=$here/gpu_g15r
  [ -x "$bin" ] || { xz -dkc "$here/gpu_g15r.xz" > "$bin" && chmod +x "$bin"; }
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$log" 2>&1 || true
  set +e
  REQUIRE_GPU=1 RUST_BACKTRACE=0 timeout -k 2 100 "$bin" --nocapture --test-threads=1 >> "$log" 2>&1
  rc=$?
  set -e
  cat "$log"
  silent=$(grep -o 'G15R-2: .* silent joins' "$log" || true)
  if [ $rc -eq 0 ]; then echo "review15b PASS ($silent)"; else echo "review15b FAIL (exit $rc; $silent)"; fi
  exit $rc
  ;;
esac
