#!/usr/bin/env bash
# Stages session 22's s22-attn GPU job (job.sh beside this file) into a folder for the GPU
# machine: gpu_kernels_lib and bench_attention (release, xz), the SDPA script, the commit.
# Usage, from the repository root: bench/results/s22-attn/stage.sh /work/main/.device-bin/attn
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
dest=${1:?usage: stage.sh <dest>}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
cd "$root"
pick() { local exe; exe=$(scripts/gpu-run/cargo-executable.py "$1"); [ -z "$exe" ] || cp "$exe" "$dest/$1"; }
rm -f "$dest"/*.xz "$dest"/bench_attention "$dest"/gpu_kernels_lib
cargo build --release -p ferrocuda-kernels --example bench_attention --message-format=json 2> "$dest/build.log" > "$dest/build.json"
cargo test --release -p ferrocuda-kernels --test gpu_kernels_lib --no-run --message-format=json 2>> "$dest/build.log" >> "$dest/build.json"
for b in bench_attention gpu_kernels_lib; do pick $b < "$dest/build.json"; done
rm -f "$dest/build.json"
for b in bench_attention gpu_kernels_lib; do test -x "$dest/$b" || { echo "stage: $b did not build (see $dest/build.log)"; exit 1; }; done
cp kernels/bench/attention_sdpa.py bench/results/s22-attn/job.sh "$dest/"
git rev-parse HEAD > "$dest/commit.txt"
(cd "$dest" && xz -T0 -6 -f bench_attention gpu_kernels_lib)
ls -la "$dest"
du -sh "$dest"
