#!/usr/bin/env bash
# Session 20 s20-attn GPU call (one H200): the sm_90 backward's `_red` instances converting dQ
# in the kernel (per-warp arrival counters; the last warp to add to a tile's rows converts
# them), issue 31.
# kernels-job.sh: every attention GPU test of gpu_kernels_lib (REQUIRE_GPU=1), then the
# forward/backward table (D 64/128, S 512-4096, causal or not) of this branch with BENCH_WG=1
# (the `_red` and `_late` instances beside the pick) and the trial instances, PyTorch SDPA
# (cuDNN, FA2), and main's bench_attention (BASE=1, the same knobs) in one call.
# Staged by: scripts/gpu-run/stage-kernels.sh /work/main/.device-bin/attn /tmp/attn_bench_base
# plus this file.
cd "$(dirname "$0")" || exit 1
export BENCH_WG=1
TESTS=attention TESTS_S=60 ATTN=full ALL=0 MAX_S=4096 REPEAT=3 BENCH_TRIAL=1 ROWS=0 BASE=1 BENCH_S=40 SDPA_S=40 bash kernels-job.sh
