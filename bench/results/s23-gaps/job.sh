#!/usr/bin/env bash
# Session 23, helper gaps (issue 30): the GPU job. Run from the repository root of the GPU
# machine: `bash .device-bin/gaps/job.sh` (about 30 s on an H200; at most about 45 s: nvcc, then
# 16 + 14 + 6 s timeouts). Prints the GPU, both bench tables and the test summary; leaves one
# file, $OUT/gaps.tar.xz (bench-a.txt, bench-b.txt, tests.txt, device.txt, nvcc.txt).
# - bench/ports10's L2 (llm.c layernorm_backward_kernel1) and V1 (vLLM finalizeMoeRoutingKernel)
#   beside their nvcc-built twins: main's versions (first try; the fix round's `_x4`, `_zip_fix`)
#   and this branch's per-loop unroll (`unroll::counted::<4>`: L2c, L2c1, V1cp;
#   `unroll::counted_loads_first::<4, _>`: V1c; `unroll::counted_gather::<4, _, _>`: V1g).
#   L2's dweight/dbias are checked within the run-to-run spread L2spread measured.
# - L2spread (bench-a only): the twin run 5 times against itself (and ours against ours, ours
#   against the twin), the largest relative difference of the atomics outputs.
# - R256, R256c, R1024, R1024c: a row sum by `RuntimeBlockReduce::sum` against
#   `cub::BlockReduce<float, N>` (run-time block size, and `reqntid`); P8: `pack8::Bf16x4`.
# - the ports10 GPU tests with REQUIRE_GPU=1 (each port against the CPU executor).
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
OUT="${OUT:-$here/out}"
out="$OUT/gaps"
mkdir -p "$out"
for f in *.xz; do [ -e "$f" ] && xz -d -k -f "$f"; done
chmod +x ports10_bench ports10_tests
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; nvcc --version | tail -2; cat commit.txt; } > "$out/device.txt" 2>&1
# The twins as bench/ports10/scripts/gpu-job.sh builds them (each source's own flags), and the
# library checks' twins (-O3, CUB from the toolkit).
nvcc -O3 --use_fast_math -std=c++17 -arch=sm_90 -cubin -DPORTS10_LLMC ports10.cu -o llmc.cubin > "$out/nvcc.txt" 2>&1 &
nvcc -O3 -std=c++17 -arch=sm_90 -cubin -DPORTS10_LLMC_NOFAST ports10.cu -o llmc_nofast.cubin >> "$out/nvcc.txt" 2>&1 &
nvcc -O3 --expt-relaxed-constexpr -std=c++17 -arch=sm_90 -cubin -DPORTS10_VLLM ports10.cu -o vllm.cubin >> "$out/nvcc.txt" 2>&1 &
nvcc -O3 -std=c++17 -arch=sm_90 -cubin nvcc-s23.cu -o s23.cubin >> "$out/nvcc.txt" 2>&1 &
wait
cubins="llmc.cubin llmc_nofast.cubin vllm.cubin s23.cubin"
A=L2,L2x4,L2zip,L2c,L2c1,V1,V1x4,V1c,V1cp,V1g,R256,R256c,R1024,R1024c,P8
PORTS10_ONLY=$A,L2spread timeout 16 ./ports10_bench $cubins > "$out/bench-a.txt" 2>&1; echo "bench-a rc=$?" >> "$out/bench-a.txt"
PORTS10_ONLY=$A timeout 14 ./ports10_bench $cubins > "$out/bench-b.txt" 2>&1; echo "bench-b rc=$?" >> "$out/bench-b.txt"
REQUIRE_GPU=1 timeout 6 ./ports10_tests --test-threads=8 > "$out/tests.txt" 2>&1
echo "tests rc=$?" >> "$out/tests.txt"
cat "$out/device.txt" "$out/bench-a.txt" "$out/bench-b.txt"
tail -5 "$out/tests.txt"
tar -cJf "$OUT/gaps.tar.xz" -C "$OUT" gaps && rm -rf "$out"
