#!/usr/bin/env bash
# Stages session 17's measurements (branch s17-ln) of issue 30's two block-reduction/handoff
# gaps for scripts/gpu-run/s17-ln.sh: vLLM's rms_norm (ports4: `RuntimeBlockReduce` with CUB's
# second level, thread 0 adding the warp sums) and llm.c's layernorm_backward_kernel10
# (ports3), each beside its nvcc twin; the twins' cubins built here by nvcc with each
# project's flags. NVCC picks the nvcc (default the CUDA 13 nvcc of this machine, else
# `nvcc`); NVCC_INCLUDE adds include folders (CUB's, where the nvcc's own tree lacks CCCL:
# e.g. NVCC_INCLUDE=/tmp/nv13/nvidia/cu13/include/cccl). Usage:
#   scripts/gpu-run/stage-s17-ln.sh DEST   (a folder git ignores, e.g. .device-bin/ln)
# then on the GPU machine `bash DEST/s17-ln.sh` (about 40-60 s; writes $OUT/s17-ln.txt).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=${1:?usage: stage-s17-ln.sh <dest>}
mkdir -p "$dest/twins"
dest=$(cd "$dest" && pwd)
cd "$root"
pick() { scripts/gpu-run/cargo-executable.py "$1"; } # the executable of target $1 (cargo's JSON on stdin)
p3=$(cargo build --release -p ferrocuda-ports3 --example ports3_bench --message-format=json 2>/dev/null | pick ports3_bench)
p4=$(cargo build --release -p ferrocuda-ports4 --example ports4_bench --message-format=json 2>/dev/null | pick ports4_bench)
[ -n "$p3" ] && [ -n "$p4" ] || { echo "stage-s17-ln.sh: a build failed (ports3_bench '$p3', ports4_bench '$p4')" >&2; exit 1; }
xz -9e -T0 -c "$p3" > "$dest/ports3_bench.xz"
xz -9e -T0 -c "$p4" > "$dest/ports4_bench.xz"
nvcc=${NVCC:-/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/nvidia/cu13/bin/nvcc}
[ -x "$nvcc" ] || nvcc=nvcc
inc=()
for d in ${NVCC_INCLUDE:-}; do inc+=("-I$d"); done
cp bench/cuda/llmc_cuda_utils.cuh "$dest/twins/"
cp bench/ports3/cuda/ports3.cu bench/ports4/cuda/ports4.cu "$dest/twins/"
( cd "$dest/twins"
  "$nvcc" "${inc[@]}" -cubin -O3 -arch=sm_90 -DPORTS3_LLMC --use_fast_math ports3.cu -o ports3_llmc.cubin
  "$nvcc" "${inc[@]}" -cubin -O3 -arch=sm_90 -DPORTS3_VLLM --expt-relaxed-constexpr ports3.cu -o ports3_vllm.cubin
  "$nvcc" "${inc[@]}" -cubin -O3 -arch=sm_90 -DPORTS4_LLMC --use_fast_math ports4.cu -o ports4_llmc.cubin
  "$nvcc" "${inc[@]}" -cubin -O3 -arch=sm_90 -DPORTS4_VLLM ports4.cu -o ports4_vllm.cubin
  "$nvcc" "${inc[@]}" -cubin -O3 -arch=sm_90 -DPORTS4_VLLM -DRMS_WARP0_REDUCE ports4.cu -o ports4_vllm_warp0.cubin )
cp scripts/gpu-run/s17-ln.sh scripts/gpu-run/ports-run-lib.sh "$dest/"
git rev-parse HEAD > "$dest/commit.txt"
git status --short | grep -v '^??' > "$dest/dirty.txt" || true
du -sh "$dest"
ls -la "$dest" "$dest/twins"
