#!/bin/bash
# The Hopper GEMM's GPU checks and benchmark, for one call on an H100/H200 machine.
# Expects beside it: hopper-gemm (the bench binary) and ferrocuda_kernels_hopper.sm_90a.cubin (the
# library's kernels, where the GEMM lives since s12-gemm; scripts/gpu-run/gemm.sh is the newer job).
# Writes logs to $OUT (or ./out). Prints a summary last.
set -u
cd "$(dirname "$0")"
OUT=${OUT:-./out}
mkdir -p "$OUT"
export REQUIRE_GPU=1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
# SASS evidence: HGMMA present, no local memory (LDL/STL) in the GEMM kernel.
cuobjdump -res-usage ferrocuda_kernels_hopper.sm_90a.cubin > "$OUT/res-usage.txt" 2>&1
if command -v cuobjdump > /dev/null; then
  cuobjdump -sass ferrocuda_kernels_hopper.sm_90a.cubin > /tmp/hopper-sass.txt 2>&1
else
  nvdisasm -c ferrocuda_kernels_hopper.sm_90a.cubin > /tmp/hopper-sass.txt 2>&1
fi
for k in gemm_bf16_tn; do
  # cuobjdump: "Function : NAME"; nvdisasm: ".text.NAME:".
  awk -v k="$k" '/Function : /{f=($3==k)} /^\.text\./{f=($0==".text." k ":")} f' /tmp/hopper-sass.txt > "$OUT/sass-$k.txt"
  echo "SASS $k: $(grep -c HGMMA "$OUT/sass-$k.txt") HGMMA, $(grep -cE 'LDL|STL' "$OUT/sass-$k.txt") LDL/STL, $(grep -c 'UTMALDG' "$OUT/sass-$k.txt") UTMALDG, $(grep -c 'SYNCS' "$OUT/sass-$k.txt") SYNCS, $(grep -c 'USETMAXREG' "$OUT/sass-$k.txt") USETMAXREG; $(grep -m1 'HGMMA' "$OUT/sass-$k.txt" | sed 's/^ *//')"
done | tee "$OUT/sass-summary.txt"
grep -A1 "gemm_bf16_tn\b\|gemm_bf16_tn " "$OUT/res-usage.txt" | head -4
# First a short pass with every kernel loaded at module load (CUDA_MODULE_LOADING=EAGER): the
# first runs stopped right after "loading the module"/before the first kernel reported; the
# [time] trace lines on stderr say where a hang happens.
echo "=== short pass, CUDA_MODULE_LOADING=EAGER ===" | tee "$OUT/hopper-gemm.txt"
timeout 90 env CUDA_MODULE_LOADING=EAGER ./hopper-gemm --sizes 4096 --runs 3 --json /tmp/eager.json 2>&1 | tee -a "$OUT/hopper-gemm.txt"
echo "short pass exit status: ${PIPESTATUS[0]}" | tee -a "$OUT/hopper-gemm.txt"
echo "=== full run ===" | tee -a "$OUT/hopper-gemm.txt"
timeout 200 ./hopper-gemm --sizes "${SIZES:-4096,8192}" --runs "${RUNS:-20}" --json "$OUT/hopper-gemm.json" 2>&1 | tee -a "$OUT/hopper-gemm.txt"
status=${PIPESTATUS[0]}
echo "=== summary ==="
cat "$OUT/sass-summary.txt"
grep -E "PASS|FAIL|TFLOP|device|HANG|===|exit status|failed" "$OUT/hopper-gemm.txt"
echo "hopper-gemm exit status: $status"
exit $status
