#!/bin/bash
# The GPU side of bench/ports7 (run by `run` from the main checkout's root, with
# .device-bin/port carried): builds the twins with the GPU machine's nvcc as the public sources
# build them (llm.c: -O3 --use_fast_math; vLLM: no fast math), then runs the bench binary
# (ports7_bench, staged xz-compressed by bench/ports7/scripts/stage.sh) twice.
set -u
export PATH="$PATH:/usr/local/cuda/bin"
D=${D:-.device-bin/port}
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
OUT=${OUT:-/tmp/ports7-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv | tee "$OUT/gpu.txt"
cd "$D" || exit 1
nvcc --version | tail -2 | tee -a "$OUT/gpu.txt"
nvcc -cubin -arch=sm_90 -O3 --use_fast_math -DPORTS7_LLMC -o ports7_llmc.sm_90.cubin ports7.cu 2>&1 | tail -3
nvcc -cubin -arch=sm_90 -O3 -std=c++17 -DPORTS7_VLLM -o ports7_vllm.sm_90.cubin ports7.cu 2>&1 | grep -v -i "warning\|remark\|^\s*$\|\^" | tail -3
xz -dkf ports7_bench.xz && chmod +x ports7_bench
for run in 1 2; do
    echo "== run $run" | tee -a "$OUT/bench.txt"
    timeout "$RUN_TIMEOUT" ./ports7_bench ports7_llmc.sm_90.cubin ports7_vllm.sm_90.cubin 2>&1 | tee -a "$OUT/bench.txt"
done
# The twins' cubins come back too: scripts/sass.py (the repository's) reads them beside the
# ports' (or builds the twins here with the same flags: --nvcc-flags "-O3 --use_fast_math -DPORTS7_LLMC",
# or "-O3 -std=c++17 -DPORTS7_VLLM").
cp ports7_llmc.sm_90.cubin ports7_vllm.sm_90.cubin "$OUT/" 2>/dev/null
