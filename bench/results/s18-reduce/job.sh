#!/usr/bin/env bash
# Session 18 (branch s18-reduce): RuntimeBlockReduce's second level as a thread-0 loop, before
# (main 7606232) and after, side by side on one GPU: llm.c layernorm_backward_kernel10 (ports3)
# and vLLM rms_norm (ports4), each beside its nvcc twin (twins: session 17's cubins, nvcc
# 13.0.88), interleaved passes; then the kernel library's row table (bench_rows, no variants)
# before, after, after, before. Summary $OUT/reduce.txt, logs $OUT/reduce-logs.tar.xz.
set -u
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$here/out}
logs=$OUT/reduce-logs; mkdir -p "$logs"
export REQUIRE_GPU=1 RUST_BACKTRACE=1 LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
began=$(date +%s); deadline=${DEADLINE_S:-140}
summary=$OUT/reduce.txt; : > "$summary"
left() { echo $(( deadline - ($(date +%s) - began) )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$summary"
bin=/tmp/reduce-bin; mkdir -p $bin
for v in before after; do for b in bench_rows ports3_bench ports4_bench; do
  xz -dc "$here/$v/$b.xz" > "$bin/$v-$b" && chmod +x "$bin/$v-$b"
done; done
echo "unpacked at $(( $(date +%s) - began )) s" | tee -a "$summary"
twins=$here/twins
cubin=$here/rows_twins.cubin
if [ -x /usr/local/cuda/bin/nvcc ] && /usr/local/cuda/bin/nvcc -cubin -O3 -arch=sm_90 "$here/rows_twins.cu" -o /tmp/rows_twins.cubin > "$logs/nvcc.log" 2>&1; then cubin=/tmp/rows_twins.cubin; echo "rows twins: nvcc here" | tee -a "$summary"; fi
step() { # NAME LIMIT CMD...
  local name=$1 limit=$2 l; shift 2; l=$(left)
  if [ "$l" -lt 8 ]; then echo "SKIPPED $name" | tee -a "$summary"; return; fi
  [ "$limit" -gt "$l" ] && limit=$l
  local s=$(date +%s); timeout "$limit" "$@" > "$logs/$name.log" 2>&1; local rc=$?
  echo "$name rc=$rc $(( $(date +%s) - s ))s" | tee -a "$summary"
}
for p in 1 2 3; do
  for v in before after; do
    step "ln_${v}_$p" 12 "$bin/$v-ports3_bench" "$twins" layernorm_backward
    step "rms_${v}_$p" 10 "$bin/$v-ports4_bench" "$twins" rms_norm
    PORTS4_BATCH=20 step "rms20_${v}_$p" 10 "$bin/$v-ports4_bench" "$twins" rms_norm
  done
done
for v in before after after2 before2; do
  b=${v%2}
  BENCH_ROWS_REPEATS=${ROWS_REPEATS:-3} step "rows_$v" 28 "$bin/$b-bench_rows" "$cubin"
done
{
  for p in 1 2 3; do for v in before after; do
    echo "==== $v pass $p"
    grep -E "twin/Rust" "$logs/ln_${v}_$p.log" | grep -v "^twin/Rust:" | tr -s ' '
    grep -E "^rms_norm_kernel.*twin/Rust" "$logs/rms_${v}_$p.log" | tr -s ' '
    grep -E "^rms_norm_kernel.*twin/Rust" "$logs/rms20_${v}_$p.log" | tr -s ' ' | sed 's/^/[20 a pair] /'
  done; done
  for v in before after after2 before2; do
    echo "==== rows $v"
    grep -E "^(pair|lib|check .*FAIL)" "$logs/rows_$v.log"
  done
  echo "checks failed: $(cat "$logs"/*.log | grep -c 'FAIL')"
} >> "$summary"
cat "$summary" | tail -n +1 | cut -c1-200
tar -C "$OUT" -cJf "$OUT/reduce-logs.tar.xz" reduce-logs && rm -rf "$logs"
