#!/bin/bash
# Follow-up GPU cases of audit 2026-11-27c, NOT run by the reviewer (one GPU call allowed):
# cases 22/24 with the module loaded before the capture, 28 with a kernel that outlives the
# timeout, and F5's corruption demonstration with a step-by-step trace.
# Lead: run from /work/main with carry [".device-bin/s9-review"], REQUIRE_GPU=1, timeout_s 150.
D=.device-bin/s9-review/followup
O=${OUT:-/tmp/review-out}
mkdir -p $O
xz -dc $D/review_gpu.xz > /tmp/review_gpu_f && chmod +x /tmp/review_gpu_f
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/device.txt 2>&1
export REQUIRE_GPU=1
run() { echo "### $*" >> $O/gpu_followup.txt; local t=$1; shift; timeout $t "$@" >> $O/gpu_followup.txt 2>&1; echo "(exit $?)" >> $O/gpu_followup.txt; }
run 10 /tmp/review_gpu_f cap_panic
run 10 /tmp/review_gpu_f cap_event
run 40 /tmp/review_gpu_f cudarc_timeout 500000000
run 40 /tmp/review_gpu_f timeout_drop 500000000
run 10 /tmp/review_gpu_f r22
cat $O/gpu_followup.txt
