#!/usr/bin/env bash
# bench/ports12's GPU job, run by the `run` tool from the directory stage.sh filled
# (bench/ports12/scripts/stage.sh; by default /work/main/.device-bin/port): builds the twins with
# nvcc as their projects build them, runs the bench twice and the tests with REQUIRE_GPU=1, and
# leaves the reports as ONE file, $OUT/port/port.tar.xz (the `run` tool brings back few files),
# and prints them on stdout too. Under 60 s on an H200.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
final="${OUT:-$here/out}/port"
out="$here/reports"
rm -rf "$out"; mkdir -p "$out" "$final"
for f in *.xz; do [ -e "$f" ] && xz -d -f "$f"; done
chmod +x ports12_bench ports12_tests
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; nvcc --version | tail -2; } > "$out/device.txt" 2>&1
# llm.c: dev/cuda/Makefile's CFLAGS (-O3 --use_fast_math); vLLM: -O3 --expt-relaxed-constexpr.
nvcc -O3 --use_fast_math -std=c++17 -arch=sm_90 -cubin -DPORTS12_LLMC ports12.cu -o llmc.cubin > "$out/nvcc.txt" 2>&1 &
nvcc -O3 --expt-relaxed-constexpr -std=c++17 -arch=sm_90 -cubin -DPORTS12_VLLM ports12.cu -o vllm.cubin >> "$out/nvcc.txt" 2>&1 &
wait
timeout 25 ./ports12_bench llmc.cubin vllm.cubin > "$out/bench1.txt" 2>&1
timeout 25 ./ports12_bench llmc.cubin vllm.cubin > "$out/bench2.txt" 2>&1
REQUIRE_GPU=1 timeout 10 ./ports12_tests --test-threads=4 > "$out/tests.txt" 2>&1
echo "tests rc=$?" >> "$out/tests.txt"
cat "$out/device.txt" "$out/nvcc.txt" "$out/bench1.txt" "$out/bench2.txt"
grep -E "FAILED|panicked" "$out/tests.txt" | head -20
tail -5 "$out/tests.txt"
tar -cJf "$final/port.tar.xz" -C "$here" reports
