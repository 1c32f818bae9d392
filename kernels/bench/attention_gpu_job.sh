#!/usr/bin/env bash
# The attention GPU job (issue 31): the attention GPU tests (the sm_90 wgmma backward, the
# deterministic mma.sync backward, the forwards), the forward/backward benchmark beside
# PyTorch's SDPA (cuDNN, FA2) with BENCH_WG=1 (every sm_90 backward instance) and BENCH_MMA=1
# (also the deterministic backward; BENCH_MMA=0 skips it), GPT-2's [B,S,H,D] backward, the
# table, the f64 gradient check against cuDNN's gradients, then compute-sanitizer memcheck of
# the sm_90 backward. About 1-2 minutes on an H200 (56 s with BENCH_MMA=0). Staged with the
# other attention and row-kernel jobs by `scripts/gpu-run/stage-kernels.sh DEST` (binaries built
# there, xz'd to fit the 64 MiB carry); then on the GPU machine: bash DEST/attention_gpu_job.sh
# (or `BWD=1 bash DEST/kernels-job.sh`; results under $OUT, at most 9 files).
# Knobs: BENCH_REPEAT=n (medians of n timings, spreads on stderr), BENCH_MIN_S=1024 (skip S 512),
# NCU_ONLY=128,1024,0 (per-kernel durations of the backward under ncu), MEMCHECK_S=0 (skip memcheck),
# MEMCHECK_FWD_S=0 (skip the persistent forward's memcheck).
# Look for: "tests rc=0" with every attention test ok, the table's "bwd ours" and "ours/cuDNN"
# columns (and "fwd twin": the forward's persistent or one-tile-per-block twin), "check rc=0" (ours
# and cuDNN within the same distance of f64), "ERROR SUMMARY: 0" twice; $OUT/table.svg the picture.
cd "$(dirname "$0")"; for f in *.xz; do xz -dkf "$f" && chmod +x "${f%.xz}"; done
export REQUIRE_GPU=1 RUST_BACKTRACE=1 LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
nvidia-smi -L | tee $OUT/logs.txt
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
timeout ${TESTS_S:-60} ./gpu_kernels_lib attention --test-threads=1 > /tmp/tests.log 2>&1; echo "tests rc=$? $(grep -h '^test result' /tmp/tests.log)"
grep -h "^test \|panicked\|FAILED\|takes the" /tmp/tests.log | head -30; cat /tmp/tests.log >> $OUT/logs.txt
BENCH_WG=${BENCH_WG:-1} BENCH_MMA=${BENCH_MMA:-1} timeout ${BENCH_S:-70} ./bench_attention $OUT/ours.jsonl > $OUT/ours.txt 2>&1; echo "bench rc=$?"; cat $OUT/ours.txt
timeout ${SDPA_S:-50} python3 attention_sdpa.py $OUT/sdpa.jsonl > $OUT/sdpa.txt 2>&1; echo "sdpa rc=$?"; tail -3 $OUT/sdpa.txt
python3 attention_table.py $OUT/ours.jsonl $OUT/sdpa.jsonl $OUT/table.json $OUT/table.md "$gpu" 2>&1 | tail -30   # also $OUT/table.svg
mkdir -p /tmp/check && ./bench_attention --check /tmp/check > /tmp/check.log 2>&1 && timeout 30 python3 attention_check.py /tmp/check >> /tmp/check.log 2>&1; echo "check rc=$?"; cat /tmp/check.log; cat /tmp/check.log >> $OUT/logs.txt
# NCU_ONLY=D,S,causal: kernel durations of the first two backward calls at that shape (prep, maps,
# kernel, dQ conversion) under Nsight Compute.
if [ -n "${NCU_ONLY:-}" ]; then
  BENCH_ONLY=$NCU_ONLY BENCH_WG=0 BENCH_MMA=0 BENCH_REPEAT=1 timeout ${NCU_S:-40} /usr/local/cuda/bin/ncu --metrics gpu__time_duration.sum --kernel-name regex:backward --launch-count ${NCU_COUNT:-8} ./bench_attention > /tmp/ncu.log 2>&1; echo "ncu rc=$?"
  grep -E "backward|duration" /tmp/ncu.log | cut -c1-120 | head -24; cat /tmp/ncu.log >> $OUT/logs.txt
fi
[ "${MEMCHECK_S:-40}" = 0 ] && exit 0
# memcheck: the sm_90 backward, then the persistent forward kernels (MEMCHECK_FWD_S=0 skips them).
for t in attention_backward_on_sm_90:${MEMCHECK_S:-40} attention_forward_persistent:${MEMCHECK_FWD_S:-30}; do
  [ "${t#*:}" = 0 ] && continue
  timeout ${t#*:} /usr/local/cuda/bin/compute-sanitizer --tool memcheck --report-api-errors no ./gpu_kernels_lib ${t%%:*} --test-threads=1 > /tmp/memcheck.log 2>&1; echo "memcheck ${t%%:*} rc=$? $(grep -h 'ERROR SUMMARY\|^test result' /tmp/memcheck.log | tr '\n' ' ')"; grep -h "Invalid\|ERROR" /tmp/memcheck.log | head -5; cat /tmp/memcheck.log >> $OUT/logs.txt
done
