#!/bin/bash
# Follow-up GPU cases of audit 2026-11-27d (not run by the reviewer: one GPU call was allowed).
# Builds nothing: runs .device-bin/s10-review/d_gpu.xz (carry that folder; staged in /work/main too).
# One GPU: ~10 s. With two GPUs (kind nvidia-h100-x2) ptds_ctx also tries GPU 1.
# Output: $OUT/gpu_followup.txt.
D=.device-bin/s10-review
O=${OUT:-/tmp/d-review-out}
mkdir -p "$O"
xz -dc $D/d_gpu.xz > /tmp/d_gpu && chmod +x /tmp/d_gpu
nvidia-smi --query-gpu=index,name,driver_version --format=csv > "$O/device_followup.txt" 2>&1
export REQUIRE_GPU=1
run() { echo "### [$(date -u +%T)] $*" >> "$O/gpu_followup.txt"; local t=$1; shift; timeout "$t" "$@" >> "$O/gpu_followup.txt" 2>&1; echo "(exit $?)" >> "$O/gpu_followup.txt"; }
run 20 /tmp/d_gpu partial_barriers    # c12 on the GPU: expect mode 0 -> 1, mode 1 -> 48, mode 2 -> 24 (as the CPU executor); a hang or another count is a CPU/GPU disagreement
run 20 /tmp/d_gpu ptds_ctx            # D4: with 2 GPUs, "[GPU 1, primary context] its per-thread stream, same buffer: Ok(())" followed by a fault or by 6s confirms the bypass across devices
run 40 /tmp/d_gpu split 300 10        # D2 again, more rounds (look for "missed a queued write: N of 300", N > 0)
cat "$O/device_followup.txt" "$O/gpu_followup.txt"
