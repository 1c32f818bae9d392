#!/usr/bin/env bash
# Stages issue 30's fourth held-out port (bench/ports4) for scripts/gpu-run/ports4.sh: the GPU
# test binary and the benchmark (xz-compressed), the twins' cubins built here by nvcc with each
# project's flags (NVCC, default the CUDA 13 nvcc of this machine, else `nvcc`), their source
# and ports4.sh itself. Usage: scripts/gpu-run/stage-ports4.sh DEST (a folder git ignores, e.g.
# .device-bin/ports4); then on the GPU machine `DEST/ports4.sh` (about 100 s).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=${1:?usage: stage-ports4.sh <dest>}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
cd "$root"
pick() { scripts/gpu-run/cargo-executable.py "$1"; } # the executable of target $1 (cargo's JSON on stdin)
bench=$(cargo build --release -p ferrocuda-ports4 --example ports4_bench --message-format=json 2>/dev/null | pick ports4_bench)
tests=$(cargo test --release -p ferrocuda-ports4 --test ports4 --no-run --message-format=json 2>/dev/null | pick ports4)
[ -n "$bench" ] && [ -n "$tests" ] || { echo "stage-ports4.sh: the ports4 build failed" >&2; exit 1; }
xz -9e -T0 -c "$bench" > "$dest/ports4_bench.xz"
xz -9e -T0 -c "$tests" > "$dest/ports4_tests.xz"
nvcc=${NVCC:-/work/cuda13-candle/nvidia/cu13/bin/nvcc}
[ -x "$nvcc" ] || nvcc=nvcc
mkdir -p "$dest/twins"
"$nvcc" -cubin -O3 -arch=sm_90 -DPORTS4_LLMC --use_fast_math bench/ports4/cuda/ports4.cu -o "$dest/twins/ports4_llmc.cubin"
"$nvcc" -cubin -O3 -arch=sm_90 -DPORTS4_VLLM bench/ports4/cuda/ports4.cu -o "$dest/twins/ports4_vllm.cubin"
cp bench/ports4/cuda/ports4.cu bench/cuda/llmc_cuda_utils.cuh scripts/gpu-run/ports4.sh scripts/gpu-run/ports-run-lib.sh "$dest/"
git rev-parse HEAD > "$dest/commit.txt"
ls -la "$dest" "$dest/twins"
