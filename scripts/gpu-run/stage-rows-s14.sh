#!/usr/bin/env bash
# Stages scripts/gpu-run/rows-s14.sh: bench_rows and the gpu_kernels_lib test binary (built here,
# release, xz-compressed), the twins' source and a cubin nvcc built here (used there only without
# nvcc), torch_rows.py, rows_table.py and the commit. Usage: stage-rows-s14.sh DEST (a folder git
# ignores); then on the GPU machine `DEST/rows-s14.sh`. NVCC overrides the nvcc used here.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=${1:?usage: stage-rows-s14.sh <dest>}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
cd "$root"
pick() { python3 -c '
import json, sys, shutil
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == sys.argv[2]:
        shutil.copy(m["executable"], sys.argv[1] + "/" + sys.argv[2])
' "$dest" "$1"; }
cargo build --release -p ferrocuda-kernels --example bench_rows --message-format=json 2>/dev/null | pick bench_rows
cargo test --release -p ferrocuda-kernels --test gpu_kernels_lib --no-run --message-format=json 2>/dev/null | pick gpu_kernels_lib
for b in bench_rows gpu_kernels_lib; do test -x "$dest/$b" || { echo "stage-rows-s14: $b did not build"; exit 1; }; xz -9e -T0 -f "$dest/$b"; done
nvcc=${NVCC:-/work/cuda13-candle/nvidia/cu13/bin/nvcc}
"$nvcc" -cubin -O3 -arch=sm_90 kernels/bench/rows_twins.cu -o "$dest/rows_twins.cubin"
"$nvcc" --version | tail -1 > "$dest/rows_twins.nvcc.txt"
cp kernels/bench/rows_twins.cu kernels/bench/torch_rows.py scripts/gpu-run/rows_table.py scripts/gpu-run/rows-s14.sh "$dest/"
git rev-parse HEAD > "$dest/commit.txt"
ls -la "$dest"
