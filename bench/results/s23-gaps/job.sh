#!/usr/bin/env bash
# Session 23, helper gaps (issue 30): the GPU job. Run from the repository root of the GPU
# machine: `bash .device-bin/gaps/job.sh` (about 30 s on an H200; at most about 50 s: nvcc, then 18 + 12 + 8 s timeouts). Reports under $OUT/gaps/.
# - bench/ports10's L2 (llm.c layernorm_backward_kernel1) and V1 (vLLM finalizeMoeRoutingKernel)
#   beside their nvcc-built twins: main's versions (first try; the fix round's `_x4`, `_zip_fix`)
#   and this branch's per-loop unroll (`unroll::counted::<4>`: L2c, L2c1, V1cp;
#   `unroll::counted_loads_first::<4, _>`: V1c), twice (two processes).
# - L2spread: the twin run 5 times against itself (and ours against ours, ours against the twin),
#   the largest relative difference of the atomics outputs dweight/dbias: the tolerance, from data.
# - the ports10 GPU tests with REQUIRE_GPU=1 (each port against the CPU executor).
# Prints the GPU, the bench tables and the test summary.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
out="${OUT:-$here/out}/gaps"
mkdir -p "$out"
for f in *.xz; do [ -e "$f" ] && xz -d -k -f "$f"; done
chmod +x ports10_bench ports10_tests
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; nvcc --version | tail -2; cat commit.txt; } > "$out/device.txt" 2>&1
# The twins as bench/ports10/scripts/gpu-job.sh builds them (each source's own flags).
nvcc -O3 --use_fast_math -std=c++17 -arch=sm_90 -cubin -DPORTS10_LLMC ports10.cu -o llmc.cubin > "$out/nvcc.txt" 2>&1 &
nvcc -O3 -std=c++17 -arch=sm_90 -cubin -DPORTS10_LLMC_NOFAST ports10.cu -o llmc_nofast.cubin >> "$out/nvcc.txt" 2>&1 &
nvcc -O3 --expt-relaxed-constexpr -std=c++17 -arch=sm_90 -cubin -DPORTS10_VLLM ports10.cu -o vllm.cubin >> "$out/nvcc.txt" 2>&1 &
wait
export PORTS10_ONLY=${PORTS10_ONLY:-L2,L2x4,L2zip,L2c,L2c1,V1,V1x4,V1c,V1cp,L2spread}
timeout 18 ./ports10_bench llmc.cubin llmc_nofast.cubin vllm.cubin > "$out/bench1.txt" 2>&1; echo "bench1 rc=$?" >> "$out/bench1.txt"
PORTS10_ONLY=${PORTS10_ONLY/,L2spread/} timeout 12 ./ports10_bench llmc.cubin llmc_nofast.cubin vllm.cubin > "$out/bench2.txt" 2>&1; echo "bench2 rc=$?" >> "$out/bench2.txt"
REQUIRE_GPU=1 timeout 8 ./ports10_tests --test-threads=4 > "$out/tests.txt" 2>&1
echo "tests rc=$?" >> "$out/tests.txt"
cat "$out/device.txt" "$out/bench1.txt" "$out/bench2.txt"
tail -5 "$out/tests.txt"
