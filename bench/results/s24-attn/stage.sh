#!/usr/bin/env bash
# Stages session 24's s24-attn GPU job (job.sh beside this file) into DEST (default
# /work/main/.device-bin/attn): this tree's bench_attention and gpu_kernels_lib (release,
# xz -1), main's bench_attention as bench_attention_base when BASE names one, the SDPA script,
# the commit. Usage from the repository root: bench/results/s24-attn/stage.sh [DEST]
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
dest=${1:-/work/main/.device-bin/attn}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
cd "$root"
rm -f "$dest"/READY "$dest"/*.xz "$dest"/bench_attention "$dest"/gpu_kernels_lib "$dest"/bench_attention_base
cargo build --release -p ferrocuda-kernels --example bench_attention --message-format=json 2> "$dest/build.log" > "$dest/build.json"
cargo test --release -p ferrocuda-kernels --test gpu_kernels_lib --no-run --message-format=json 2>> "$dest/build.log" >> "$dest/build.json"
for b in bench_attention gpu_kernels_lib; do
  exe=$(scripts/gpu-run/cargo-executable.py "$b" < "$dest/build.json")
  [ -n "$exe" ] && cp "$exe" "$dest/$b" || { echo "stage: $b did not build (see $dest/build.log)"; exit 1; }
done
rm -f "$dest/build.json"
[ -z "${BASE:-}" ] || cp "$BASE" "$dest/bench_attention_base"
cp kernels/bench/attention_sdpa.py bench/results/s24-attn/job.sh "$dest/"
git rev-parse HEAD > "$dest/commit.txt"
git status --short | grep -v '^??' > "$dest/dirty.txt" || true
(cd "$dest" && for b in bench_attention gpu_kernels_lib bench_attention_base; do [ ! -f $b ] || xz -T2 -1 -f $b; done)
ls -la "$dest"
du -sh "$dest"
