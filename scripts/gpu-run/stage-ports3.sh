#!/usr/bin/env bash
# Stages issue 30's third held-out port (bench/ports3) for scripts/gpu-run/ports3.sh: the
# benchmark binary (xz-compressed), the twins' source and ports3.sh itself. Usage:
# scripts/gpu-run/stage-ports3.sh DEST (a folder git ignores, e.g. .device-bin/ports3); then on
# the GPU machine `DEST/ports3.sh` (about 90 s; needs nvcc and compute-sanitizer there).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=${1:?usage: stage-ports3.sh <dest>}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
cd "$root"
exe=$(cargo build --release -p ferrocuda-ports3 --example ports3_bench --message-format=json 2>/dev/null |
  scripts/gpu-run/cargo-executable.py ports3_bench)
[ -n "$exe" ] || { echo "stage-ports3.sh: the ports3_bench build failed" >&2; exit 1; }
xz -9e -T0 -c "$exe" > "$dest/ports3_bench.xz"
cp bench/ports3/cuda/ports3.cu bench/cuda/llmc_cuda_utils.cuh scripts/gpu-run/ports3.sh scripts/gpu-run/ports-run-lib.sh "$dest/"
git rev-parse HEAD > "$dest/commit.txt"
ls -la "$dest"
