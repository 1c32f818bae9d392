#!/usr/bin/env bash
# Stages issue 30's second held-out port (bench/ports2) for scripts/gpu-run/ports2.sh: the
# benchmark binary (xz-compressed), the twins' source and ports2.sh itself. Usage:
# scripts/gpu-run/stage-ports2.sh DEST (a folder git ignores, e.g. .device-bin/ports2); then on
# the GPU machine `DEST/ports2.sh` (about 100 s; needs nvcc and compute-sanitizer there).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=${1:?usage: stage-ports2.sh <dest>}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
cd "$root"
exe=$(cargo build --release -p ferrocuda-ports2 --example ports2_bench --message-format=json 2>/dev/null |
  scripts/gpu-run/cargo-executable.py ports2_bench)
xz -9e -T0 -c "$exe" > "$dest/ports2_bench.xz"
cp bench/ports2/cuda/ports2.cu bench/cuda/llmc_cuda_utils.cuh scripts/gpu-run/ports2.sh scripts/gpu-run/ports-run-lib.sh "$dest/"
git rev-parse HEAD > "$dest/commit.txt"
ls -la "$dest"
