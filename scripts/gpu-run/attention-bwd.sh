#!/usr/bin/env bash
# Stages the attention GPU job (issue 31: the sm_90 attention backward's tests, the
# forward/backward benchmark beside PyTorch SDPA's cuDNN and FA2 backends, the f64/cuDNN
# gradient check, ncu durations of the backward's kernels, compute-sanitizer memcheck) into one
# folder for a GPU machine without cargo. Usage, from the repository root on a build machine:
#   scripts/gpu-run/attention-bwd.sh .device-bin/attn     # a folder git ignores (~7 MB)
# then on the GPU machine (about 70 s on an H200; what s11-bwd's runs 1 and 2 ran):
#   cd .device-bin/attn && BENCH_MMA=0 BENCH_WG=1 BENCH_REPEAT=3 BENCH_MIN_S=1024 \
#     NCU_ONLY=128,1024,0 MEMCHECK_S=25 bash attention_gpu_job.sh
# Look for "tests rc=0" with every attention test ok (10 of them, among them
# attention_backward_with_scratch_on_sm_90_is_captured_into_a_graph and session 12's
# attention_forward_persistent_kernels_match_their_twins_and_f64), the table's backward
# "ours/cuDNN" column, its "fwd twin" (the persistent forward) and "bwd trial" (`_late_lpt`)
# columns, "CHECK PASS", the ncu durations, "ERROR SUMMARY: 0 errors" for the backward and the
# persistent forward. Results land in $OUT (table.md, table.json, table.svg, ours.txt, sdpa.txt,
# logs.txt).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=${1:?usage: attention-bwd.sh <dest>}
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
cp target/release/examples/bench_attention kernels/bench/attention_*.py kernels/bench/attention_gpu_job.sh "$dest/"
(cd "$dest" && xz -T0 -6 -f bench_attention gpu_kernels_lib)
du -sh "$dest"
