#!/usr/bin/env bash
# Stages session 14's attention forward job (scripts/gpu-run/attn-s14-job.sh) into one folder
# for a GPU machine without cargo: gpu_kernels_lib, bench_attention (this tree), the SDPA,
# table and check scripts, and, when given, a previous bench_attention to time beside it.
# Usage, from the repository root on a build machine:
#   scripts/gpu-run/attn-s14.sh .device-bin/s14-attn [previous bench_attention]
# then on the GPU machine: `bash .device-bin/s14-attn/attn-s14-job.sh` (BASE=0 without a
# previous binary; see the job's header for its knobs). About 8 MB.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=${1:?usage: attn-s14.sh <dest> [previous bench_attention]}
cd "$root"
mkdir -p "$dest"
test_bin=$(cargo test --release -p ferrocuda-kernels --test gpu_kernels_lib --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for l in sys.stdin:
    try: m=json.loads(l)
    except ValueError: continue
    if m.get("reason")=="compiler-artifact" and m.get("executable") and m["target"]["name"]=="gpu_kernels_lib": print(m["executable"])')
cargo build --release -p ferrocuda-kernels --example bench_attention
rm -f "$dest"/*.xz
cp "$test_bin" "$dest/gpu_kernels_lib"
cp target/release/examples/bench_attention kernels/bench/attention_sdpa.py kernels/bench/attention_table.py kernels/bench/attention_check.py \
  scripts/gpu-run/attn-s14-job.sh "$dest/"
if [ -n "${2:-}" ]; then cp "$2" "$dest/bench_attention_base"; fi
(cd "$dest" && xz -T0 -6 -f bench_attention gpu_kernels_lib && { [ ! -f bench_attention_base ] || xz -T0 -6 -f bench_attention_base; })
du -sh "$dest"
