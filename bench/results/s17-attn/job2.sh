#!/usr/bin/env bash
# Session 17's second GPU call (issue 31, the sm_90 backward at short S): the backward GPU tests,
# the table to S 2k with every backward trial instance beside the pick (BENCH_TRIAL=1: the
# static `_persistent` and counter-fed `_persistent_dyn` forms), PyTorch SDPA in the same call,
# then Nsight Compute kernel durations at D 128 S 512 non-causal: the pick's four launches (prep,
# maps, kernel, dQ conversion) and the `_persistent_dyn` kernel. Staged by
# scripts/gpu-run/stage-kernels.sh into .device-bin/attn (plus this file); run there as
# `bash .device-bin/attn/job2.sh`.
cd "$(dirname "$0")" || exit 1
TESTS=backward TESTS_S=40 ATTN=full ALL=0 MAX_S=2048 REPEAT=5 BENCH_TRIAL=1 ROWS=0 BASE=0 BENCH_S=30 SDPA_S=30 bash kernels-job.sh
rc=$?
ncu=/usr/local/cuda/bin/ncu
for spec in "pick:regex:attention_backward:4" "dyn:regex:persistent_dyn:1"; do
  IFS=: read -r tag kind re count <<< "$spec"
  BENCH_ONLY=128,512,0 BENCH_TRIAL=1 BENCH_REPEAT=1 BENCH_MMA=0 BENCH_WG=0 timeout 14 $ncu --clock-control none --metrics gpu__time_duration.sum \
    --kernel-name "$kind:$re" --launch-count "$count" ./bench_attention > "$OUT/ncu-$tag.txt" 2>&1
  echo "ncu $tag rc=$?"; grep -E "attention|gpu__time_duration" "$OUT/ncu-$tag.txt" | head -12
done
exit $rc
