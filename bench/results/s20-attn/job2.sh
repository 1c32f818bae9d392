#!/usr/bin/env bash
# Session 20 s20-attn GPU call 2 (one H200): the in-kernel dQ conversion moved to the
# `_red_cvt` trial instances (bf16 D 64, D 64 causal, D 128), the picks back to the `_red`
# schedule with the conversion kernel. kernels-job.sh: every attention GPU test of
# gpu_kernels_lib (REQUIRE_GPU=1), the forward/backward table of this branch with the trial
# instances (the `_red_cvt` ones among them), PyTorch SDPA (cuDNN, FA2), main's bench_attention
# (BASE=1). Staged by scripts/gpu-run/stage-kernels.sh /work/main/.device-bin/attn
# /tmp/attn_bench_base (binaries then xz -1), plus this file.
cd "$(dirname "$0")" || exit 1
TESTS=attention TESTS_S=70 ATTN=full ALL=0 MAX_S=4096 REPEAT=3 BENCH_TRIAL=1 ROWS=0 BASE=1 BENCH_S=40 SDPA_S=40 bash kernels-job.sh
