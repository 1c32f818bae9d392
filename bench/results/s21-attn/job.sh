#!/usr/bin/env bash
# Session 21 s21-attn GPU call (one H200): the sm_90 backward's `_cvt` trial instances (the bulk
# schedule converting dQ in the kernel: the adding warp waits for its bulk reductions a step
# late, `cp.async.bulk.wait_group 2`, and arrives on a counter per tile share; the last
# arrival converts the share; no fence in the consumers), issue 31.
# 1. The backward's GPU tests (REQUIRE_GPU=1): attention_backward*, s17_persistent*, s21_bulk*
#    (the `_cvt` instances against f64), with a time limit.
# 2. kernels-job.sh (TESTS=0): this branch's bench_attention (D 64/128, S 512-4096, causal or
#    not, the pick and every trial instance: BENCH_TRIAL=1), PyTorch SDPA (cuDNN, FA2).
# Staged by: scripts/gpu-run/stage-kernels.sh /work/main/.device-bin/attn, plus this file.
cd "$(dirname "$0")" || exit 1
for f in gpu_kernels_lib.xz bench_attention.xz; do xz -dkf "$f" && chmod +x "${f%.xz}"; done
rm -f bench_rows.xz
export REQUIRE_GPU=1 RUST_BACKTRACE=1
mkdir -p "${OUT:-out}"
start=$SECONDS
timeout "${TESTS_S:-45}" ./gpu_kernels_lib attention_backward s17_persistent s21_bulk --test-threads=1 > "${OUT:-out}/tests.txt" 2>&1; rc=$?
echo "backward tests rc=$rc ($((SECONDS - start)) s)"
grep -h "^test \|test result\|panicked" "${OUT:-out}/tests.txt" | head -30
TESTS=0 ATTN=full ALL=0 MAX_S=4096 REPEAT=3 BENCH_TRIAL=1 ROWS=0 BASE=0 BENCH_S=${BENCH_S:-50} SDPA_S=${SDPA_S:-35} bash kernels-job.sh
