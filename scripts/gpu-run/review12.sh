#!/bin/bash
# Audit 2026-11-27f (session 12 held-out review): the GPU half of F12-1..F12-4.
#
# Runs, from the repository root of a GPU machine, with `carry: [".device-bin/s12-review"]`:
#   1. the regression tests of the fixes, staged as binaries in $B (built here with
#      `cargo test --release --no-run` and `xz -9`):
#        gpu_nccl        f12_1_operations_a_group_would_defer_past_their_buffers_are_refused
#        gpu_host_seams  f12_2_drops_and_pinned_allocations_after_a_timeout_return   (child, <= 60 s)
#        gpu_kernels_lib f12_4_allocating_forms_name_a_short_operand_before_allocating_even_inside_a_capture
#      expected: "test result: ok. 1 passed" for each;
#   2. the audit's repro cases (audit/2026-11-27f/run_gpu.sh on the staged f_gpu, built BEFORE the
#      fixes: it shows the findings themselves; ~90 s).
# Output: $OUT/review12.txt (and $OUT/gpu.txt from step 2). About 2.5 min on one H100/H200.
# F12-1's two-rank variants (c4_drop, c4_manual) show the use after free only with 2 GPUs
# (nvidia-h100-x2); with one GPU c4_sendrecv shows it.
B=${REVIEW12_BIN:-.device-bin/s12-review}
O=${OUT:-/tmp/review12-out}
mkdir -p "$O" /tmp/review12
export REQUIRE_GPU=1 RUST_BACKTRACE=0 NCCL_NVLS_ENABLE=0
log="$O/review12.txt"
nvidia-smi --query-gpu=index,name,driver_version --format=csv > "$O/device.txt" 2>&1
for t in gpu_nccl:f12_1_operations_a_group_would_defer_past_their_buffers_are_refused \
         gpu_host_seams:f12_2_drops_and_pinned_allocations_after_a_timeout_return \
         gpu_kernels_lib:f12_4_allocating_forms_name_a_short_operand_before_allocating_even_inside_a_capture; do
  bin=${t%%:*}; name=${t#*:}
  if [ -f "$B/$bin.xz" ]; then xz -dc "$B/$bin.xz" > /tmp/review12/$bin && chmod +x /tmp/review12/$bin; fi
  echo "### $bin $name" >> "$log"
  if [ -x /tmp/review12/$bin ]; then
    timeout -k 2 90 /tmp/review12/$bin "$name" --exact --nocapture --test-threads=1 >> "$log" 2>&1
    echo "(exit $?)" >> "$log"
  else
    echo "(not staged: $B/$bin.xz)" >> "$log"
  fi
done
if [ -f "$B/f_gpu.xz" ] && [ -f "$B/run_gpu.sh" ]; then
  F_BIN_DIR="$B" OUT="$O" bash "$B/run_gpu.sh"
fi
cat "$log"
