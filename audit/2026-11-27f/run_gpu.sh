#!/bin/bash
# GPU cases of audit 2026-11-27f (F12-*). Builds nothing: runs the staged binary
# ${F_BIN_DIR:-.device-bin/s12-review}/f_gpu.xz (carry that folder). Each case runs in its own
# process under `timeout` (a hang or a fault ends only that case); no case is started after
# 165 s. Output: $OUT/gpu.txt (or /tmp/f-review-out/gpu.txt). About 60-90 s on one H100/H200;
# the c4 cases use every GPU present (up to 2): on nvidia-h100-x2 they run with 2 ranks.
D=${F_BIN_DIR:-.device-bin/s12-review}
O=${OUT:-/tmp/f-review-out}
mkdir -p "$O"
xz -dc $D/f_gpu.xz > /tmp/f_gpu && chmod +x /tmp/f_gpu
export REQUIRE_GPU=1 RUST_BACKTRACE=0 NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=index,name,driver_version --format=csv > "$O/device.txt" 2>&1
START=$(date +%s)
run() {
  local t=$1; shift
  if [ $(( $(date +%s) - START )) -gt 165 ]; then echo "### SKIPPED (time budget): $*" >> "$O/gpu.txt"; return; fi
  echo "### [$(date -u +%T)] $*" >> "$O/gpu.txt"
  timeout -k 2 "$t" "$@" >> "$O/gpu.txt" 2>&1
  echo "(exit $?)" >> "$O/gpu.txt"
}
run 30 /tmp/f_gpu c4_sendrecv      # F12-1: self send/recv in `group`, recv buffer dropped in the body
run 30 /tmp/f_gpu c4_nested        # F12-1: nested groups, Grouped API only, buffer dropped after the inner group
run 30 /tmp/f_gpu c4_drop 0        # F12-1: plain OnStream all_reduce in `group`, y dropped, z zeroed_async
run 30 /tmp/f_gpu c4_drop 1        # F12-1: same, z = DeviceBuffer::zeroed
run 30 /tmp/f_gpu c4_manual        # F12-1: public doc(hidden) group_begin/group_end
run 12 /tmp/f_gpu t2 0             # F12-2: drop(GemmEngine) after a reported timeout
run 12 /tmp/f_gpu t2 1             # F12-2: drop(PinnedBuffer never used) after a timeout
run 12 /tmp/f_gpu t2 2             # F12-2: drop(DeviceBuffer::zeroed, unused) after a timeout
run 12 /tmp/f_gpu t2 3             # F12-2: drop(cufft Plan) after a timeout
run 12 /tmp/f_gpu t2 4             # F12-2 control: drop(Stream)
run 12 /tmp/f_gpu t2 5             # F12-2: new PinnedBuffer after a timeout
run 20 /tmp/f_gpu k2_capture         # F12-4: allocating forms, a wrong length, in a capture
run 20 /tmp/f_gpu gemm_capture       # G2: cuBLAS strided-batched GEMM in Stream::capture, replayed
run 8  /tmp/f_gpu nb 64 64 64      # F12-3 control
run 8  /tmp/f_gpu nb 64 64 32      # F12-3: a whole warp exited before a named barrier
run 8  /tmp/f_gpu nb 32 32 16      # F12-3: half a warp exited
run 8  /tmp/f_gpu nb 48 64 48      # F12-3: partial last warp
run 8  /tmp/f_gpu nb 64 64 40      # F12-3: warp 1 has 8 live lanes
run 8  /tmp/f_gpu nb_mixed 64      # F12-3 control
run 8  /tmp/f_gpu nb_mixed 32      # F12-3: two counts on one barrier phase
echo "done after $(( $(date +%s) - START )) s" >> "$O/gpu.txt"
