#!/usr/bin/env bash
# Stages issue 30's fifth held-out port (bench/ports5) for scripts/gpu-run/ports5.sh: the GPU
# harness (examples/ports5_bench.rs, built here, xz-compressed), the twins' cubins built here by
# nvcc 13 with each project's flags (NVCC, default the CUDA 13 nvcc of this machine, else
# `nvcc`), their source (ports5.sh rebuilds them with the GPU machine's nvcc when it has one)
# and ports5.sh itself. Usage: scripts/gpu-run/stage-ports5.sh DEST (a folder git ignores, e.g.
# .device-bin/ports5); then on the GPU machine `DEST/ports5.sh` (about 30 s).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=${1:?usage: stage-ports5.sh <dest>}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
cd "$root"
bench=$(cargo build --release -p ferrocuda-ports5 --example ports5_bench --message-format=json 2>/dev/null | scripts/gpu-run/cargo-executable.py ports5_bench)
[ -n "$bench" ] || { echo "stage-ports5.sh: the ports5 build failed" >&2; exit 1; }
rm -f "$dest/ports5_bench"
xz -9 -T0 -c "$bench" > "$dest/ports5_bench.xz"
nvcc=${NVCC:-/work/cuda13-candle/nvidia/cu13/bin/nvcc}
[ -x "$nvcc" ] || nvcc=nvcc
mkdir -p "$dest/twins"
"$nvcc" -cubin -O3 -arch=sm_90 -DPORTS5_LLMC --use_fast_math bench/ports5/cuda/ports5.cu -o "$dest/twins/ports5_llmc.cubin"
"$nvcc" -cubin -O3 -arch=sm_90 -DPORTS5_VLLM bench/ports5/cuda/ports5.cu -o "$dest/twins/ports5_vllm.cubin"
cp bench/ports5/cuda/ports5.cu bench/cuda/llmc_cuda_utils.cuh scripts/gpu-run/ports5.sh "$dest/"
git rev-parse HEAD > "$dest/commit.txt"
ls -la "$dest" "$dest/twins"
