#!/usr/bin/env bash
# Issue 30's third held-out port on a GPU: the eight ported llm.c and vLLM kernels
# (bench/ports3) checked against their CPU references and timed against their CUDA C++ twins
# (bench/ports3/cuda/ports3.cu, built here by nvcc with each project's flags), two passes, then
# compute-sanitizer (memcheck on all eight at small sizes, racecheck on three with shared
# memory; checks only, no timing), for the binary staged by `scripts/gpu-run/stage-ports3.sh DEST`.
#
# On the GPU machine: `DEST/ports3.sh` (about 110 s; PORTS3_DEADLINE_S caps it, default 220).
# Logs go to $OUT (or DEST/out/): bench_1.log, bench_2.log, sanitizer logs, summary.txt.
# Look for: every "check ...: ok", one "twin/Rust" per kernel in each pass (above 1: Rust is
# faster; layernorm_backward_kernel10, global_norm_squared_kernel, softmax_forward_kernel5,
# fused_classifier_kernel5 and dynamic_per_token_scaled_fp8_quant_kernel also have a "(fixed)"
# row: the fix rounds' variant; fused_classifier_kernel5 a "(paired)" row too: session 14's
# max_then_sum_all; softmax_forward_kernel5 a "(prefix)" row: session 14's zip_input write pass),
# "ERROR SUMMARY: 0 errors" and "RACECHECK SUMMARY: 0 hazards" in the sanitizer logs, among
# them memcheck_classifier.log and racecheck_classifier.log (the fused classifier: 8 checks ok:
# ours, its in-place and paired variants and the twin).
set -u
here=$(cd "$(dirname "$0")" && pwd)
dest=${OUT:-$here/out}
mkdir -p "$dest"
export REQUIRE_GPU=1 RUST_BACKTRACE=1
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
began=$(date +%s)
deadline=${PORTS3_DEADLINE_S:-220}
summary="$dest/summary.txt"; : > "$summary"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv; echo "commit: $(cat "$here/commit.txt" 2>/dev/null)"; } | tee "$dest/device.txt"
# The deadline-bounded `run NAME LIMIT COMMAND...` (staged beside this script).
. "$here/ports-run-lib.sh"
bin="$here/ports3_bench"
[ -x "$bin" ] || { xz -dc "$here/ports3_bench.xz" > "$bin" && chmod +x "$bin"; }
twins="$dest/twins"; mkdir -p "$twins"
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
run nvcc_llmc 90 "$nvcc" -cubin -O3 -arch=sm_90 -DPORTS3_LLMC --use_fast_math "$here/ports3.cu" -o "$twins/ports3_llmc.cubin"
run nvcc_vllm 90 "$nvcc" -cubin -O3 -arch=sm_90 -DPORTS3_VLLM --expt-relaxed-constexpr "$here/ports3.cu" -o "$twins/ports3_vllm.cubin"
for pass in 1 2; do run "bench_$pass" 60 "$bin" "$twins"; done
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
export PORTS3_RUNS=0 PORTS3_SMALL=1 # checks only, no timing
# ferrocuda probes the twins' modules for its own globals and counts parameters by asking past
# the last one; those failed driver calls are expected, so API errors are not reported.
# The fused classifier in steps of its own (first try, in-place fixed variant and the twin, at
# V 8191 / P 8192: llm.c's prepare_softmax_blockwide3 loops forever below V = 8 blockDim.x - 7,
# which is why session 13's V 1003 never returned), so that a slow step cannot hide the others.
others="encoder_forward global_norm softmax_forward layernorm_backward merge_attn_states reshape_and_cache dynamic_per_token"
run memcheck 60 "$sanitizer" --tool memcheck --report-api-errors no "$bin" "$twins" $others
run memcheck_classifier 40 "$sanitizer" --tool memcheck --report-api-errors no "$bin" "$twins" fused_classifier
run racecheck 45 "$sanitizer" --tool racecheck --report-api-errors no "$bin" "$twins" layernorm_backward dynamic_per_token global_norm
run racecheck_classifier 40 "$sanitizer" --tool racecheck --report-api-errors no "$bin" "$twins" fused_classifier
echo "---- ratios (twin/Rust) per pass:" | tee -a "$summary"
for f in "$dest"/bench_*.log; do echo "$(basename "$f" .log): $(grep -E 'twin/Rust' "$f" | grep -v '^twin/Rust' | sed -E 's/ +Rust .*twin\/Rust/:/' | tr -s ' ' | tr '\n' ';')" | tee -a "$summary"; done
grep -hE "FAILED|ERROR SUMMARY|RACECHECK SUMMARY|Error|panicked" "$dest"/bench_*.log "$dest"/memcheck*.log "$dest"/racecheck*.log 2>/dev/null | sort | uniq -c | tee -a "$summary"
for f in memcheck_classifier racecheck_classifier; do echo "$f: $(grep -cE '^check fused_classifier.*: ok' "$dest/$f.log" 2>/dev/null) checks ok; $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' "$dest/$f.log" 2>/dev/null | tr '\n' ' ')" | tee -a "$summary"; done
echo "==== tables"
for f in "$dest"/bench_*.log; do echo "== $(basename "$f")"; cat "$f"; done
