#!/bin/bash
# Session 19 (helper `part`), one GPU call: before (main 4a21dbc's binaries) and after (branch
# s19-part), side by side in one call, passes interleaved:
#  - llm.c layernorm_backward_kernel10 (bench/ports3: first try, fixed, regions) vs its nvcc twin
#    (session 17's cubins, nvcc 13.0.88, `twins/`): the regions port's warp-0 fold in u32;
#  - vLLM per_token_group_quant_8bit (bench/ports6 V3: first try at 128, SegmentRows<16> at groups
#    64/128/256 and bytes at 100) and the int8 azp quantiser (V2) vs twins built here by nvcc with
#    the public sources' flags (bench/ports6/scripts/gpu-job.sh).
# Run from the main checkout's root with .device-bin/part carried. Summary: $OUT/summary.txt.
set -u
export PATH="$PATH:/usr/local/cuda/bin" REQUIRE_GPU=1 LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
D=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/s19-part-out}
mkdir -p "$OUT/logs"
began=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv | tee "$OUT/gpu.txt"
nvcc --version | tail -2 | tee -a "$OUT/gpu.txt"
cd "$D" || exit 1
nvcc -cubin -arch=sm_90 -O3 -std=c++17 --expt-relaxed-constexpr --extended-lambda -DPORTS6_VLLM \
    -o /tmp/ports6_vllm.sm_90.cubin ports6.cu > "$OUT/logs/nvcc-vllm.log" 2>&1 &
nvcc -cubin -arch=sm_90 -O3 --use_fast_math -DPORTS6_LLMC -o /tmp/ports6_llmc.sm_90.cubin ports6.cu > "$OUT/logs/nvcc-llmc.log" 2>&1 &
bin=/tmp/s19-bin; mkdir -p $bin
for v in before after; do for b in ports3_bench ports6_bench; do
  xz -dc "$D/$v/$b.xz" > "$bin/$v-$b" && chmod +x "$bin/$v-$b"
done; done
wait
echo "ready at $(( $(date +%s) - began )) s" | tee -a "$OUT/gpu.txt"
for p in 1 2 3; do
  # Stop starting passes past 135 s (the call's limit is 180 s; the summary must be written).
  [ $(( $(date +%s) - began )) -gt 135 ] && { echo "pass $p skipped (time)" >> "$OUT/gpu.txt"; continue; }
  for v in before after; do
    timeout 25 "$bin/$v-ports3_bench" "$D/twins" layernorm_backward > "$OUT/logs/ln_${v}_$p.log" 2>&1; echo "ln $v $p rc=$?" >> "$OUT/gpu.txt"
    PORTS6_ONLY=V2,V3 timeout 35 "$bin/$v-ports6_bench" /tmp/ports6_llmc.sm_90.cubin /tmp/ports6_vllm.sm_90.cubin > "$OUT/logs/p6_${v}_$p.log" 2>&1; echo "p6 $v $p rc=$? at $(( $(date +%s) - began )) s" >> "$OUT/gpu.txt"
  done
done
{
  cat "$OUT/gpu.txt"
  for p in 1 2 3; do for v in before after; do
    echo "==== $v pass $p"
    grep -E "twin/Rust" "$OUT/logs/ln_${v}_$p.log" | grep -v "^twin/Rust:" | tr -s ' '
    grep -E "vLLM|FAIL|differ|mismatch" "$OUT/logs/p6_${v}_$p.log" | tr -s ' '
  done; done
} > "$OUT/summary.txt"
cat "$OUT/summary.txt" | cut -c1-220
tar -C "$OUT" -cJf "$OUT/logs.tar.xz" logs && rm -rf "$OUT/logs"
