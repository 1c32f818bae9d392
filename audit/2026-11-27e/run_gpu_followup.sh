#!/bin/bash
# Follow-up GPU cases of audit 2026-11-27e (NOT run by the audit: its one GPU call is
# run_gpu.sh; these pin down E1 and E2 and finish a case whose harness was wrong). Same staged
# binary as run_gpu.sh (.device-bin/s11-review/e_gpu.xz). About 30 s on one H100/H200.
# Output: $OUT/gpu_followup.txt (or /tmp/e-review-out/gpu_followup.txt).
D=${E_BIN_DIR:-.device-bin/s11-review}
O=${OUT:-/tmp/e-review-out}
mkdir -p "$O"
xz -dc $D/e_gpu.xz > /tmp/e_gpu && chmod +x /tmp/e_gpu
export REQUIRE_GPU=1 RUST_BACKTRACE=0
export LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=index,name,driver_version --format=csv > "$O/device.txt" 2>&1
run() { echo "### [$(date -u +%T)] $*" >> "$O/gpu_followup.txt"; local t=$1; shift; timeout -k 2 "$t" "$@" >> "$O/gpu_followup.txt" 2>&1; echo "(exit $?)" >> "$O/gpu_followup.txt"; }
run 8  /tmp/e_gpu elect 4                 # E3 control: warp::shuffle in elect_divergent mode 2's shape (expect a hang too; the CPU executor reports this one)
run 15 /tmp/e_gpu cudarc_uaf 0 300        # E1 control: home and launch stream of the slice's own context
run 15 /tmp/e_gpu cudarc_uaf 1 300        # E1: home and launch stream of another context: cudarc's read/free/reuse unordered?
run 30 /tmp/e_gpu to_modload_steps        # E2: which step hangs after a reported timeout
run 10 /tmp/e_gpu will_use_self           # E8: will_use_for whose work reads the same split view (expect HUNG after 5 s, exit 3)
run 25 /tmp/e_gpu capture_lib             # E-C3 again, with the batched-GEMM harness fixed
cat "$O/device.txt" "$O/gpu_followup.txt"
