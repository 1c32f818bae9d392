#!/bin/bash
# GPU cases of audit 2026-11-27e. Builds nothing: runs the staged binary
# .device-bin/s11-review/e_gpu.xz (carry that folder). Each case runs in its own process under
# `timeout` (a hang or a fault ends only that case); cases stop being started once 165 s have
# passed (the run's limit is 200 s). Output: $OUT/gpu.txt (or /tmp/e-review-out/gpu.txt).
# About 60-120 s on one H100/H200.
D=${E_BIN_DIR:-.device-bin/s11-review}
O=${OUT:-/tmp/e-review-out}
mkdir -p "$O"
xz -dc $D/e_gpu.xz > /tmp/e_gpu && chmod +x /tmp/e_gpu
export REQUIRE_GPU=1 RUST_BACKTRACE=0
export LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=index,name,driver_version --format=csv > "$O/device.txt" 2>&1
START=$(date +%s)
run() {
  local t=$1; shift
  if [ $(( $(date +%s) - START )) -gt 165 ]; then echo "### SKIPPED (time budget): $*" >> "$O/gpu.txt"; return; fi
  echo "### [$(date -u +%T)] $*" >> "$O/gpu.txt"
  timeout -k 2 "$t" "$@" >> "$O/gpu.txt" 2>&1
  echo "(exit $?)" >> "$O/gpu.txt"
}
run 8  /tmp/e_gpu elect 1                 # E-G1: elect_one, lanes 16..31 returned
run 8  /tmp/e_gpu elect 2                 # E-G1: elect_one, lanes 16..31 at a block barrier
run 8  /tmp/e_gpu elect 3                 # E-G1: elect_one, block of 48 (partial last warp)
run 8  /tmp/e_gpu elect 0                 # E-G1 control
run 8  /tmp/e_gpu cluster_exit 16         # E-G2: cluster::sync with exited threads
run 8  /tmp/e_gpu cluster_exit 32         # E-G2 control
run 10 /tmp/e_gpu cudarc_ctx 0            # E-X2 control
run 10 /tmp/e_gpu cudarc_ctx 1            # E-X2: cudarc slice lent with another context's stream
run 15 /tmp/e_gpu to_blocking             # E-T1: calls after a reported timeout (blocking stream)
run 25 /tmp/e_gpu to_modload              # E-T2: first use of another module after a timeout
run 20 /tmp/e_gpu capture_lib             # E-C3: kernels library in captures
run 25 /tmp/e_gpu gemm_adamw              # E-K1: GEMM and AdamW on two streams sharing W
run 15 /tmp/e_gpu two_thread_attention    # E-K4: sm_90 attention on two threads/streams, split output
run 15 /tmp/e_gpu lib_views               # E-K3: row kernels through odd views vs CPU executor
run 12 /tmp/e_gpu gemm_views              # E-K2: GEMM odd views, bias alignment, k = 0
run 12 /tmp/e_gpu capture_event           # E-C1: event recorded into a capture, used after
run 10 /tmp/e_gpu capture_engine          # E-C4: GEMM engine made inside a capture
run 10 /tmp/e_gpu capture_panic           # E-C2: panic inside a capture closure
run 10 /tmp/e_gpu ctx_mismatch_lib        # E-X1: kernels library, buffers of another context
run 12 /tmp/e_gpu cluster_cfg             # E-L1: cluster 16/8/3, cluster + cooperative, grid/block 0
run 10 /tmp/e_gpu coop_shared             # E-L2: cooperative grid vs dynamic shared memory
run 10 /tmp/e_gpu badattr                 # E-M1: kernel attribute arguments at their edges
run 8  /tmp/e_gpu plain_and_split         # E-G3: cluster/PDL calls in a plain launch; shared split
run 8  /tmp/e_gpu callback_panic 0        # E-H1: host callback panics
run 8  /tmp/e_gpu callback_panic 1        # E-H1: host callback's panic payload panics on drop
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
if [ -n "$CS" ]; then
  run 20 "$CS" --tool synccheck /tmp/e_gpu elect 1
  run 20 "$CS" --tool synccheck /tmp/e_gpu elect 3
fi
echo "### done after $(( $(date +%s) - START )) s" >> "$O/gpu.txt"
cat "$O/device.txt" "$O/gpu.txt"
