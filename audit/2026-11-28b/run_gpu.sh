#!/usr/bin/env bash
# GPU repros of audit 2026-11-28b (held-out review, session 14, branch s14-review).
# Run from the repository root on the GPU machine, carry [".device-bin/s14-review"]:
#   bash .device-bin/s14-review/run.sh            (one GPU: about 20 s; two GPUs: G14-2 too)
# Output: $OUT/g14.txt (or ./g14-out/g14.txt). Three builds of tests/gpu_g14.rs:
#   before_1   = main before G14-1's fix (the test has only g14_1)
#   before_2_3 = G14-1 fixed, G14-2 and G14-3 not
#   after      = every fix of the branch
# Expected:
#   before_1:   g14_1 FAILED; its child prints "G14-1 HANDED OUT __ferrocuda_panic_slot" and
#               "G14-1 WRITTEN: the device panic handler stored into a pinned host buffer chosen
#               by safe code: N of 4096 bytes non-zero, `square_checked` at Some(..)" (N > 0)
#   before_2_3: g14_1 ok ("G14-1 REFUSED __ferrocuda_panic_slot: global ... belongs to ferrocuda");
#               g14_3 FAILED (timing-dependent, expected within the 3 s): "G14-3: ... the other
#               thread's G graphs hold K nodes" with K > 0; g14_2 with two GPUs FAILED:
#               "same raw handle true" then "G14-2 ACCEPTED" (with one GPU: SKIPPED ... 2 are needed)
#   after:      all ok; "G14-3: ... hold 0 nodes", "... N ran" equal to the queued count;
#               two GPUs: "G14-2 REFUSED: ... BufferInOtherContext"-style message
#               ("... of another context ..."); if "same raw handle false" is printed, G14-2 is
#               inconclusive on that driver (the fix still holds).
#   after, --ignored g14_5 (G14-5, open): FAILED, "G14-5: L launches returned Ok, ...; the
#               capturing thread's G graphs hold K nodes it never queued" with K > 0 (another
#               thread's launches recorded silently into the capture)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$PWD/g14-out}
mkdir -p "$out"
log=$out/g14.txt
: > "$log"
nvidia-smi -L >> "$log" 2>&1
for b in before_1 before_2_3 after; do
  xz -dkf "$here/gpu_g14_$b.xz"
  chmod +x "$here/gpu_g14_$b"
  echo "=== gpu_g14_$b" >> "$log"
  REQUIRE_GPU=1 timeout 120 "$here/gpu_g14_$b" --test-threads=1 --nocapture >> "$log" 2>&1
  echo "=== gpu_g14_$b rc=$?" >> "$log"
done
echo "=== gpu_g14_after --ignored g14_5 (open: expected to fail)" >> "$log"
REQUIRE_GPU=1 timeout 60 "$here/gpu_g14_after" --ignored g14_5 --test-threads=1 --nocapture >> "$log" 2>&1
echo "=== g14_5 rc=$?" >> "$log"
tail -c 6000 "$log"
