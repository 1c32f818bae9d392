#!/usr/bin/env bash
# Session 24's gaps job (bench/results/s24-gaps/stage.sh fills its folder): builds bench/ports11's
# twins with nvcc as their sources build them, runs this branch's ports11 bench on L1 (first try,
# fix, and both under `#[kernel(ftz)]`), L5 (first try and `PermutedRows`), V2 and R1024 (the
# block reduction's trailing barrier against CUB), twice, with
# main's bench between them, then bench/ports11's tests with REQUIRE_GPU=1. Reports: ONE file,
# $OUT/gaps/gaps.tar.xz, and the figures on stdout. About 30-45 s on an H200.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
final="${OUT:-$here/out}/gaps"
out="$here/reports"
rm -rf "$out"; mkdir -p "$out" "$final"
for f in *.xz; do [ -e "$f" ] && xz -d -f "$f"; done
chmod +x ports11_bench* ports11_tests
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; nvcc --version | tail -2; } > "$out/device.txt" 2>&1
nvcc -O3 --use_fast_math -std=c++17 -arch=sm_90 -cubin -DPORTS11_LLMC ports11.cu -o llmc.cubin > "$out/nvcc.txt" 2>&1 &
nvcc -O3 -std=c++17 -arch=sm_90 -cubin -DPORTS11_LLMC_NOFAST ports11.cu -o llmc_nofast.cubin >> "$out/nvcc.txt" 2>&1 &
nvcc -O3 --expt-relaxed-constexpr -std=c++17 -arch=sm_90 -cubin -DPORTS11_VLLM ports11.cu -o vllm.cubin >> "$out/nvcc.txt" 2>&1 &
# bench/results/s23-gaps/nvcc-s23.cu: `cub::BlockReduce<float, 1024>` (R1024), as session 23 built it.
nvcc -O3 -std=c++17 -arch=sm_90 -cubin nvcc-s23.cu -o s23.cubin >> "$out/nvcc.txt" 2>&1 &
wait
export PORTS11_ONLY="${GAPS_ONLY:-L1,L5,V2,R1024}"
timeout 20 ./ports11_bench llmc.cubin llmc_nofast.cubin vllm.cubin s23.cubin > "$out/bench-a.txt" 2>&1
if [ -x ports11_bench_main ]; then timeout 10 ./ports11_bench_main llmc.cubin llmc_nofast.cubin vllm.cubin > "$out/bench-main.txt" 2>&1; fi
timeout 20 ./ports11_bench llmc.cubin llmc_nofast.cubin vllm.cubin s23.cubin > "$out/bench-b.txt" 2>&1
REQUIRE_GPU=1 timeout 15 ./ports11_tests --test-threads=4 > "$out/tests.txt" 2>&1
echo "tests rc=$?" >> "$out/tests.txt"
cat "$out/device.txt"
for f in bench-a bench-main bench-b; do [ -e "$out/$f.txt" ] && { echo "== $f"; cat "$out/$f.txt"; }; done
grep -E "FAILED|panicked" "$out/tests.txt" | head -20
tail -4 "$out/tests.txt"
tar -cJf "$final/gaps.tar.xz" -C "$here" reports
