#!/bin/bash
# Runs the GPU cases of audit 2026-11-27c (from /work/main with carry .device-bin/s9-review).
D=.device-bin/s9-review
O=${OUT:-/tmp/review-out}
mkdir -p $O
xz -dc $D/review_gpu.xz > /tmp/review_gpu && chmod +x /tmp/review_gpu
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/device.txt 2>&1
export REQUIRE_GPU=1
run() { echo "### $*" >> $O/gpu.txt; local t=$1; shift; timeout $t "$@" >> $O/gpu.txt 2>&1; echo "(exit $?)" >> $O/gpu.txt; }
for c in r1 r2 r3 r4 r5 r8 r9 r10 r11 cap_panic cap_alloc cap_event cap_forget guard panic; do
  run 10 /tmp/review_gpu $c
done
run 35 /tmp/review_gpu cudarc_timeout 6000000
run 20 /tmp/review_gpu timeout_drop
run 30 compute-sanitizer --tool initcheck /tmp/review_gpu r9
run 30 compute-sanitizer --tool racecheck /tmp/review_gpu r10
cat $O/device.txt
