#!/usr/bin/env bash
# Stages session 16's measurements of issue 30's two slow classes (branch s16-ln) for
# scripts/gpu-run/s16-ln.sh: llm.c's layernorm_backward_kernel10 (the last-block handoff) and
# vLLM's rms_norm (a block reduction at 1024 threads), each beside its nvcc twin; the
# out_partitions GPU tests (the handoff on the GPU); the twins' cubins built here by nvcc with
# each project's flags (NVCC, default the CUDA 13 nvcc of this machine, else `nvcc`). Usage:
#   scripts/gpu-run/stage-s16-ln.sh DEST   (a folder git ignores, e.g. .device-bin/s16-ln)
# then on the GPU machine `bash DEST/s16-ln.sh` (about 60-90 s; writes $OUT/s16-ln.txt).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=${1:?usage: stage-s16-ln.sh <dest>}
mkdir -p "$dest/twins"
dest=$(cd "$dest" && pwd)
cd "$root"
pick() { scripts/gpu-run/cargo-executable.py "$1"; } # the executable of target $1 (cargo's JSON on stdin)
p3=$(cargo build --release -p ferrocuda-ports3 --example ports3_bench --message-format=json 2>/dev/null | pick ports3_bench)
p4=$(cargo build --release -p ferrocuda-ports4 --example ports4_bench --message-format=json 2>/dev/null | pick ports4_bench)
op=$(cargo test --release -p ferrocuda-main --test out_partitions --no-run --message-format=json 2>/dev/null | pick out_partitions)
[ -n "$p3" ] && [ -n "$p4" ] && [ -n "$op" ] || { echo "stage-s16-ln.sh: a build failed (ports3_bench '$p3', ports4_bench '$p4', out_partitions '$op')" >&2; exit 1; }
xz -9e -T0 -c "$p3" > "$dest/ports3_bench.xz"
xz -9e -T0 -c "$p4" > "$dest/ports4_bench.xz"
xz -9e -T0 -c "$op" > "$dest/out_partitions.xz"
nvcc=${NVCC:-/work/cuda13-candle/nvidia/cu13/bin/nvcc}
[ -x "$nvcc" ] || nvcc=nvcc
cp bench/cuda/llmc_cuda_utils.cuh "$dest/twins/"
cp bench/ports3/cuda/ports3.cu bench/ports4/cuda/ports4.cu "$dest/twins/"
( cd "$dest/twins"
  "$nvcc" -cubin -O3 -arch=sm_90 -DPORTS3_LLMC --use_fast_math ports3.cu -o ports3_llmc.cubin
  "$nvcc" -cubin -O3 -arch=sm_90 -DPORTS3_VLLM --expt-relaxed-constexpr ports3.cu -o ports3_vllm.cubin
  "$nvcc" -cubin -O3 -arch=sm_90 -DPORTS4_LLMC --use_fast_math ports4.cu -o ports4_llmc.cubin
  "$nvcc" -cubin -O3 -arch=sm_90 -DPORTS4_VLLM ports4.cu -o ports4_vllm.cubin
  # Session 16's diagnostic: the twin with ferrocuda's block-reduction second level.
  "$nvcc" -cubin -O3 -arch=sm_90 -DPORTS4_VLLM -DRMS_WARP0_REDUCE ports4.cu -o ports4_vllm_warp0.cubin )
cp scripts/gpu-run/s16-ln.sh scripts/gpu-run/ports-run-lib.sh "$dest/"
git rev-parse HEAD > "$dest/commit.txt"
du -sh "$dest"
ls -la "$dest" "$dest/twins"
