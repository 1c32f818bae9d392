#!/bin/bash
# The attention and GEMM benchmarks for one call on an H100/H200 machine: `hopper-attention`
# (checks against f64, timings), PyTorch SDPA timed the same way in the same job (sdpa.py, with
# the comparison of outputs), and `hopper-gemm` (isolated and steady-state timings beside cuBLAS
# and the CUDA C++ twin). Expects beside it: hopper-attention, hopper-gemm, sdpa.py.
# Logs to $OUT (or ./out); a summary last.
set -u
cd "$(dirname "$0")"
OUT=${OUT:-./out}
mkdir -p "$OUT" /tmp/attention-dump
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
export REQUIRE_GPU=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv 2>&1 | tee "$OUT/attention.txt"
timeout ${ATTN_TIMEOUT:-240} ./hopper-attention --runs "${RUNS:-10}" --json "$OUT/attention.json" --dump /tmp/attention-dump ${ATTN_ARGS:-} 2>&1 | tee -a "$OUT/attention.txt"
attention=${PIPESTATUS[0]}
PY=/opt/torch/.venv/bin/python3
[ -x "$PY" ] || PY=python3
PYTHONUNBUFFERED=1 timeout ${SDPA_TIMEOUT:-200} "$PY" sdpa.py "$OUT/attention.json" /tmp/attention-dump "$OUT/sdpa.json" ${SDPA_ARGS:-} 2>&1 | tee "$OUT/sdpa.txt"
sdpa=${PIPESTATUS[0]}
gemm=skipped
if [ -z "${SKIP_GEMM:-}" ]; then
  timeout ${GEMM_TIMEOUT:-200} ./hopper-gemm --sizes "${SIZES:-4096,8192}" --runs 20 --json "$OUT/gemm.json" --twin-cubin /tmp/twin.cubin 2>&1 | tee "$OUT/gemm.txt"
  gemm=${PIPESTATUS[0]}
fi
echo "=== summary ==="
grep -E "FAIL|HANG|failed" "$OUT/attention.txt" | head -20
grep -E "steady|TFLOP" "$OUT/gemm.txt" 2>/dev/null | grep -E "8192|4096" | head -30
sed -n '/^TFLOP/,$p' "$OUT/sdpa.txt"
grep -E "PASS d|FAIL" "$OUT/sdpa.txt"
echo "exit status: hopper-attention $attention, sdpa.py $sdpa, hopper-gemm $gemm"
