#!/bin/bash
# Session 18 (helper `part`): the GPU side of bench/ports6 for the re-ports of issue 30's gaps 2,
# 3, 4 and 6, run by `run` from the main checkout's root with .device-bin/part carried. Builds
# the twins as bench/ports6/scripts/gpu-job.sh does (the public sources' flags), then runs the
# bench twice with PORTS6_ONLY=L3,L4,V1,V3: the first tries and the session 18 forms beside them.
set -u
export PATH="$PATH:/usr/local/cuda/bin"
D=.device-bin/part
OUT=${OUT:-/tmp/ports6-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv | tee "$OUT/gpu.txt"
cd "$D" || exit 1
nvcc --version | tail -2 | tee -a "$OUT/gpu.txt"
nvcc -cubin -arch=sm_90 -O3 --use_fast_math -DPORTS6_LLMC -o ports6_llmc.sm_90.cubin ports6.cu 2>&1 | tail -3
nvcc -cubin -arch=sm_90 -O3 -std=c++17 --expt-relaxed-constexpr --extended-lambda -DPORTS6_VLLM \
    -o ports6_vllm.sm_90.cubin ports6.cu 2>&1 | grep -v -i "warning\|remark\|^\s*$\|\^" | tail -3
xz -dkf ports6_bench.xz && chmod +x ports6_bench
for run in 1 2; do
    echo "== run $run" | tee -a "$OUT/bench.txt"
    PORTS6_ONLY=L3,L4,V1,V3 timeout 60 ./ports6_bench ports6_llmc.sm_90.cubin ports6_vllm.sm_90.cubin 2>&1 | tee -a "$OUT/bench.txt"
done
