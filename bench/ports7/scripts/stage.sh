#!/bin/bash
# Stages the GPU job of bench/ports7 into the main checkout's .device-bin/port/ (git ignores
# it): the twins' source, the job script and the bench binary (xz). Build the binary first:
#   cargo build --release -p ferrocuda-ports7 --bin ports7_bench
# (The SASS beside the twins needs no GPU: scripts/sass.py at the repository's root.)
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(cd "$here/../.." && pwd)
dest=${1:-/work/main/.device-bin/port}
mkdir -p "$dest"
cp "$here/cuda/ports7.cu" "$here/scripts/gpu-job.sh" "$dest/"
xz -9 -T2 -c "$root/target/release/ports7_bench" > "$dest/ports7_bench.xz"
ls -la "$dest"
