#!/bin/bash
# bench/ports8 on the GPU: build the twins with nvcc (llm.c's flags, vLLM's flags), run the
# tests with REQUIRE_GPU=1, then the bench twice in one call. (The first version of this script
# hung: `exec > >(tee ..)` then a bare `wait`, which also waits for the tee process
# substitution. Now the group is piped to tee and `wait` names the two nvcc jobs.)
D=$(cd "$(dirname "$0")" && pwd)
cd "$D"
LOG=${OUT:-/tmp}/ports8.log
{
set -x
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv
xz -dkf ports8_tests.xz ports8_bench.xz && chmod +x ports8_tests ports8_bench
nvcc --version | tail -2
timeout 40 nvcc -cubin -arch=sm_90 -O3 --use_fast_math -std=c++17 -DPORTS8_LLMC ports8.cu -o llmc.cubin & P1=$!
timeout 40 nvcc -cubin -arch=sm_90 -O3 -std=c++17 -DPORTS8_VLLM ports8.cu -o vllm.cubin & P2=$!
REQUIRE_GPU=1 ./ports8_tests --test-threads=1 2>&1 | tail -15
wait $P1 $P2
ls -la *.cubin && sha256sum *.cubin
./ports8_bench llmc.cubin vllm.cubin
./ports8_bench llmc.cubin vllm.cubin
echo done
} 2>&1 | tee "$LOG"
