#!/usr/bin/env bash
# Stages the ferrocuda-kernels GPU job (issue 31; scripts/gpu-run/kernels-job.sh) into one
# folder for a GPU machine without cargo: the attention and row kernels' test binary
# (gpu_kernels_lib), bench_attention and bench_rows (built here, release, xz-compressed), the
# CUDA C++ twins of the row kernels (source, and a cubin nvcc built here: used there only
# without nvcc), the PyTorch and table scripts, the backward's job
# (kernels/bench/attention_gpu_job.sh), the commit, and, when given, a previous
# bench_attention to time beside this tree's (the job's ATTN=full BASE=1).
# One stager for every attention and row-kernel run (it replaces sessions 13-14's attn-s13.sh,
# attn-s14.sh, attention-bwd.sh, stage-rows.sh and stage-rows-s14.sh).
# Usage, from the repository root on a build machine:
#   scripts/gpu-run/stage-kernels.sh .device-bin/kernels [previous bench_attention]
# then on the GPU machine: `bash .device-bin/kernels/kernels-job.sh` (see its header; the
# default run takes about 60-80 s). About 15 MB. NVCC overrides the nvcc used here.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=${1:?usage: stage-kernels.sh <dest> [previous bench_attention]}
base=${2:-}
[ -z "$base" ] || base=$(cd "$(dirname "$base")" && pwd)/$(basename "$base")
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
cd "$root"
# Copies the executable of target $1 from cargo's JSON messages on stdin to $dest/$1.
pick() { local exe; exe=$(scripts/gpu-run/cargo-executable.py "$1"); [ -z "$exe" ] || cp "$exe" "$dest/$1"; }
rm -f "$dest"/*.xz "$dest"/bench_attention "$dest"/bench_rows "$dest"/gpu_kernels_lib "$dest"/bench_attention_base
cargo build --release -p ferrocuda-kernels --example bench_attention --example bench_rows --message-format=json 2> "$dest/build.log" > "$dest/build.json"
cargo test --release -p ferrocuda-kernels --test gpu_kernels_lib --no-run --message-format=json 2>> "$dest/build.log" >> "$dest/build.json"
for b in bench_attention bench_rows gpu_kernels_lib; do pick $b < "$dest/build.json"; done
rm -f "$dest/build.json"
for b in bench_attention bench_rows gpu_kernels_lib; do
  test -x "$dest/$b" || { echo "stage-kernels: $b did not build (see $dest/build.log)"; exit 1; }
done
[ -z "$base" ] || cp "$base" "$dest/bench_attention_base"
# nvcc: $NVCC, else the one on PATH, else the nvidia-cuda-nvcc wheel's that
# scripts/install-device-toolchain.sh installs beside ptxas.
nvcc=${NVCC:-$(command -v nvcc || python3 -c 'import os, nvidia; print(os.path.join(list(nvidia.__path__)[0], "cu13", "bin", "nvcc"))')}
"$nvcc" -cubin -O3 -arch=sm_90 kernels/bench/rows_twins.cu -o "$dest/rows_twins.cubin"
"$nvcc" --version | tail -1 > "$dest/rows_twins.nvcc.txt"
cp kernels/bench/rows_twins.cu kernels/bench/torch_rows.py scripts/gpu-run/rows_table.py \
  kernels/bench/attention_sdpa.py kernels/bench/attention_table.py kernels/bench/attention_check.py kernels/bench/attention_gpu_job.sh \
  scripts/gpu-run/kernels-job.sh "$dest/"
git rev-parse HEAD > "$dest/commit.txt"
(cd "$dest" && for b in bench_attention bench_rows gpu_kernels_lib bench_attention_base; do [ ! -f $b ] || xz -T0 -6 -f $b; done)
ls -la "$dest"
du -sh "$dest"
