#!/usr/bin/env bash
# Session 18 s18-attn GPU call: the attention entry points as #[kernel]s with typed launchers.
# Every attention GPU test of gpu_kernels_lib (REQUIRE_GPU=1), then the forward/backward table
# (D 64/128, S 512-2048, causal or not, trial backward beside the pick) of this branch, PyTorch
# SDPA (cuDNN, FA2) and main's bench_attention (BASE=1) in the same call.
cd "$(dirname "$0")" || exit 1
TESTS=attention TESTS_S=60 ATTN=full ALL=0 MAX_S=2048 REPEAT=3 BENCH_TRIAL=1 ROWS=0 BASE=1 BENCH_S=30 SDPA_S=35 bash kernels-job.sh
