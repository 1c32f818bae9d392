#!/usr/bin/env bash
# Issue 30's second held-out port on a GPU: the eight ported llm.c and vLLM kernels and the
# ninth, the CUDA samples' last-block reduction (reduce_single_pass)
# (bench/ports2) checked against their CPU references and timed against their CUDA C++ twins
# (bench/ports2/cuda/ports2.cu, built here by nvcc with each project's flags), two passes, then
# compute-sanitizer (memcheck on seven kernels, racecheck on the three with shared memory), for the
# binary staged by `scripts/gpu-run/stage-ports2.sh DEST`.
#
# On the GPU machine: `DEST/ports2.sh` (about 100 s; PORTS2_DEADLINE_S caps it, default 190).
# Logs go to $OUT (or DEST/out/): bench_1.log, bench_2.log, sanitizer logs, summary.txt.
# Look for: every "check ...: ok", one "twin/Rust" per kernel in each pass (above 1: Rust is
# faster; gelu_backward_inplace, layernorm_forward_kernel3 and permute_kernel also have a
# "(fixed)" row: the fix round's port), "ERROR SUMMARY: 0 errors" and "RACECHECK SUMMARY: 0
# hazards" in the sanitizer logs.
set -u
here=$(cd "$(dirname "$0")" && pwd)
dest=${OUT:-$here/out}
mkdir -p "$dest"
export REQUIRE_GPU=1 RUST_BACKTRACE=1
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
began=$(date +%s)
deadline=${PORTS2_DEADLINE_S:-190}
summary="$dest/summary.txt"; : > "$summary"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv; echo "commit: $(cat "$here/commit.txt" 2>/dev/null)"; } | tee "$dest/device.txt"
# The deadline-bounded `run NAME LIMIT COMMAND...` (staged beside this script).
. "$here/ports-run-lib.sh"
bin="$here/ports2_bench"
[ -x "$bin" ] || { xz -dc "$here/ports2_bench.xz" > "$bin" && chmod +x "$bin"; }
twins="$dest/twins"; mkdir -p "$twins"
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
run nvcc_vllm 90 "$nvcc" -cubin -O3 -arch=sm_90 -DPORTS2_VLLM "$here/ports2.cu" -o "$twins/ports2_vllm.cubin"
run nvcc_llmc 90 "$nvcc" -cubin -O3 -arch=sm_90 -DPORTS2_LLMC --use_fast_math "$here/ports2.cu" -o "$twins/ports2_llmc.cubin"
for pass in 1 2; do run "bench_$pass" 70 "$bin" "$twins"; done
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
export PORTS2_RUNS=1
# ferrocuda probes the twins' modules for its own globals and counts parameters by asking past
# the last one; those failed driver calls are expected (RESULTS.md), so API errors are not reported.
run memcheck 60 "$sanitizer" --tool memcheck --report-api-errors no "$bin" "$twins" permute count_and_sort_expert_tokens reduce_single_pass matmul_backward_bias fused_add_rms_norm gelu_backward_inplace layernorm_forward
run racecheck 60 "$sanitizer" --tool racecheck "$bin" "$twins" matmul_backward_bias fused_add_rms_norm reduce_single_pass
echo "---- ratios (twin/Rust) per pass:" | tee -a "$summary"
for f in "$dest"/bench_*.log; do echo "$(basename "$f" .log): $(grep -E 'twin/Rust' "$f" | sed -E 's/ +Rust .*twin\/Rust/:/' | tr -s ' ' | tr '\n' ';')" | tee -a "$summary"; done
grep -hE "FAILED|ERROR SUMMARY|RACECHECK SUMMARY|Error" "$dest"/bench_*.log "$dest"/memcheck.log "$dest"/racecheck.log 2>/dev/null | sort | uniq -c | tee -a "$summary"
echo "==== tables"
for f in "$dest"/bench_*.log; do echo "== $(basename "$f")"; cat "$f"; done
