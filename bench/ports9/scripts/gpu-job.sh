#!/usr/bin/env bash
# bench/ports9's GPU job, run by the `run` tool from the directory stage.sh filled
# (bench/ports9/scripts/stage.sh): builds the twins with nvcc as their sources build them,
# runs the bench twice and the tests with REQUIRE_GPU=1, and leaves the reports under $OUT.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
out="${OUT:-$here/out}"
mkdir -p "$out/ports9"
for f in *.xz; do [ -e "$f" ] && xz -d -f "$f"; done
chmod +x ports9_bench ports9_tests
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; nvcc --version | tail -2; } > "$out/ports9/device.txt" 2>&1
# llm.c: its Makefile's and dev/cuda's flags (-O3 --use_fast_math); matmul_backward_bias.cu
# documents no --use_fast_math; vLLM builds without it.
nvcc -O3 --use_fast_math -std=c++17 -arch=sm_90 -cubin -DPORTS9_LLMC ports9.cu -o llmc.cubin &
nvcc -O3 -std=c++17 -arch=sm_90 -cubin -DPORTS9_LLMC_NOFAST ports9.cu -o llmc_nofast.cubin &
nvcc -O3 -std=c++17 -arch=sm_90 -cubin -DPORTS9_VLLM ports9.cu -o vllm.cubin &
wait
./ports9_bench llmc.cubin llmc_nofast.cubin vllm.cubin > "$out/ports9/bench1.txt" 2>&1
./ports9_bench llmc.cubin llmc_nofast.cubin vllm.cubin > "$out/ports9/bench2.txt" 2>&1
REQUIRE_GPU=1 ./ports9_tests --test-threads=4 > "$out/ports9/tests.txt" 2>&1
echo "tests rc=$?" >> "$out/ports9/tests.txt"
cat "$out/ports9/device.txt" "$out/ports9/bench1.txt" "$out/ports9/bench2.txt"
tail -5 "$out/ports9/tests.txt"
