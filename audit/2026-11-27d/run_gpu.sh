#!/bin/bash
# GPU cases of audit 2026-11-27d. Builds nothing: runs the staged binary
# .device-bin/s10-review/d_gpu.xz (carry that folder; from /work/main too, where the same file is staged).
# Output: $OUT/gpu.txt (or /tmp/d-review-out/gpu.txt). About 30 s on one H100/H200.
D=.device-bin/s10-review
O=${OUT:-/tmp/d-review-out}
mkdir -p "$O"
xz -dc $D/d_gpu.xz > /tmp/d_gpu && chmod +x /tmp/d_gpu
nvidia-smi --query-gpu=index,name,driver_version --format=csv > "$O/device.txt" 2>&1
export REQUIRE_GPU=1
run() { echo "### [$(date -u +%T)] $*" >> "$O/gpu.txt"; local t=$1; shift; timeout "$t" "$@" >> "$O/gpu.txt" 2>&1; echo "(exit $?)" >> "$O/gpu.txt"; }
run 20 /tmp/d_gpu ptds_control 400           # D1 control: own streams (kernel ~400 ms), expect all 7 read / 0 sevens in the new buffer
run 20 /tmp/d_gpu ptds 400                   # D1: cudarc per-thread streams on two threads
run 40 /tmp/d_gpu split 100 10               # D2: concurrent writers into split halves, 100 rounds of a ~10 ms kernel
run 40 /tmp/d_gpu split_uaf 100 10           # D2b: the same, then drop + a new allocation: look for the old kernel's value in the new buffer
run 15 /tmp/d_gpu attn_capture               # D3: attention_backward_with_scratch in a capture
run 10 /tmp/d_gpu partial                    # D5: warp ops in a partial warp (compare with d_cpu c11)
run 15 /tmp/d_gpu attn_views                 # G7: attention forward through odd views vs the CPU executor
run 12 /tmp/d_gpu callback                   # G5: CUDA calls through ferrocuda inside a host callback
run 15 /tmp/d_gpu ptds_ctx                   # D4: per-thread stream of another context (same GPU: cudarc non-primary; GPU 1 if present) with a buffer of the primary context
cat "$O/device.txt" "$O/gpu.txt"
