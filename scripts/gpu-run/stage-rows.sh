#!/usr/bin/env bash
# Stages issue 31's row-kernel benchmark for scripts/gpu-run/rows.sh: bench_rows (built here,
# release, xz-compressed), the twins' source and a cubin built here by nvcc (used on the GPU machine only if it
# has no nvcc), torch_rows.py, rows_table.py, rows.sh and the commit. Usage:
# scripts/gpu-run/stage-rows.sh DEST (a folder git ignores, e.g. .device-bin/rows); then on the
# GPU machine `DEST/rows.sh`. NVCC overrides the nvcc used here.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=${1:?usage: stage-rows.sh <dest>}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
cd "$root"
cargo build --release -p ferrocuda-kernels --example bench_rows --message-format=json 2>/dev/null | python3 -c '
import json, sys, shutil
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "bench_rows":
        shutil.copy(m["executable"], sys.argv[1] + "/bench_rows")
' "$dest"
test -x "$dest/bench_rows" || { echo "stage-rows: bench_rows did not build (run the cargo command above without --message-format to see why)"; exit 1; }
nvcc=${NVCC:-/work/cuda13-candle/nvidia/cu13/bin/nvcc}
"$nvcc" -cubin -O3 -arch=sm_90 kernels/bench/rows_twins.cu -o "$dest/rows_twins.cubin"
"$nvcc" --version | tail -1 > "$dest/rows_twins.nvcc.txt"
# Compressed for the carry limit (35 MB -> a few MB); rows.sh unpacks it.
xz -9e -T0 -f "$dest/bench_rows"
cp kernels/bench/rows_twins.cu kernels/bench/torch_rows.py scripts/gpu-run/rows_table.py scripts/gpu-run/rows.sh "$dest/"
git rev-parse HEAD > "$dest/commit.txt"
ls -la "$dest"
