#!/usr/bin/env bash
# Session 19 s19-attn GPU call (one H200): the attention kernels with typed operands (issue 31).
# 1. kernels-job.sh: every attention GPU test of gpu_kernels_lib (REQUIRE_GPU=1), then the
#    forward/backward table (D 64/128, S 512-4096, causal or not, the trial backward beside the
#    pick) of this branch, PyTorch SDPA (cuDNN, FA2) and main's bench_attention (BASE=1), one call.
# 2. audit_g18r (REQUIRE_GPU=1) and bench/hopper's gpu_attention (the forward through the typed
#    launchers from bench/hopper: every schedule on masked lengths against f64).
# Staged by: scripts/gpu-run/stage-kernels.sh /work/main/.device-bin/attn /tmp/attn/bench_attention_base
# plus the two test binaries (xz) and this file.
cd "$(dirname "$0")" || exit 1
OUT=${OUT:-$(pwd)/out}
for f in audit_g18r.xz gpu_attention.xz; do [ -f "$f" ] && xz -dkf "$f" && chmod +x "${f%.xz}"; done
TESTS=attention TESTS_S=75 ATTN=full ALL=0 MAX_S=4096 REPEAT=3 BENCH_TRIAL=1 ROWS=0 BASE=1 BENCH_S=40 SDPA_S=45 bash kernels-job.sh; rc=$?
export REQUIRE_GPU=1
for t in audit_g18r gpu_attention; do
  [ -x "$t" ] || { echo "$t missing"; rc=1; continue; }
  start=$SECONDS
  timeout 40 ./$t --test-threads=1 > "$OUT/$t.txt" 2>&1; r=$?
  echo "$t rc=$r ($((SECONDS - start)) s)"; grep -E "^test |test result|panicked" "$OUT/$t.txt" | head -40
  [ $r = 0 ] || rc=1
done
exit $rc
