#!/usr/bin/env bash
# Stages session 15's measurements of issue 30's remaining slow classes (branch s15-ln) for
# scripts/gpu-run/ports-s15.sh: the ports3 and ports4 benchmarks (xz-compressed), the twins'
# cubins built here by nvcc with each project's flags (NVCC, default the CUDA 13 nvcc of this
# machine, else `nvcc`), the runner and its step helper. Usage:
#   scripts/gpu-run/stage-ports-s15.sh DEST   (a folder git ignores, e.g. .device-bin/s15)
# then on the GPU machine `DEST/ports-s15.sh` (about 40 s; needs compute-sanitizer there).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=${1:?usage: stage-ports-s15.sh <dest>}
mkdir -p "$dest/twins"
dest=$(cd "$dest" && pwd)
cd "$root"
pick() { scripts/gpu-run/cargo-executable.py "$1"; } # the executable of target $1 (cargo's JSON on stdin)
p3=$(cargo build --release -p ferrocuda-ports3 --example ports3_bench --message-format=json 2>/dev/null | pick ports3_bench)
p4=$(cargo build --release -p ferrocuda-ports4 --example ports4_bench --message-format=json 2>/dev/null | pick ports4_bench)
[ -n "$p3" ] && [ -n "$p4" ] || { echo "stage-ports-s15.sh: a benchmark build failed" >&2; exit 1; }
xz -9e -T0 -c "$p3" > "$dest/ports3_bench.xz"
xz -9e -T0 -c "$p4" > "$dest/ports4_bench.xz"
nvcc=${NVCC:-/work/cuda13-candle/nvidia/cu13/bin/nvcc}
[ -x "$nvcc" ] || nvcc=nvcc
cp bench/cuda/llmc_cuda_utils.cuh "$dest/twins/"
cp bench/ports3/cuda/ports3.cu bench/ports4/cuda/ports4.cu "$dest/twins/"
( cd "$dest/twins"
  "$nvcc" -cubin -O3 -arch=sm_90 -DPORTS3_LLMC --use_fast_math ports3.cu -o ports3_llmc.cubin
  "$nvcc" -cubin -O3 -arch=sm_90 -DPORTS3_VLLM --expt-relaxed-constexpr ports3.cu -o ports3_vllm.cubin
  "$nvcc" -cubin -O3 -arch=sm_90 -DPORTS4_LLMC --use_fast_math ports4.cu -o ports4_llmc.cubin
  "$nvcc" -cubin -O3 -arch=sm_90 -DPORTS4_VLLM ports4.cu -o ports4_vllm.cubin )
cp scripts/gpu-run/ports-s15.sh scripts/gpu-run/ports-run-lib.sh "$dest/"
git rev-parse HEAD > "$dest/commit.txt"
ls -la "$dest" "$dest/twins"
