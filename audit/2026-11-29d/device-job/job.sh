#!/usr/bin/env bash
# audit 2026-11-29d (review): the held-out review's GPU repros, staged as
# /work/main/.device-bin/review/ (this file, the repro scripts, the built g23r1_op wheel).
# Runs in well under 25 s; writes $OUT/review/out.txt. Needs no cargo or network.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out="${OUT:-/tmp/review-out}/review"
mkdir -p "$out"
{
  echo "== nvidia-smi"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -2
  # The wheel is abi3 (CPython >= 3.9): unpacked onto PYTHONPATH, no pip needed.
  rm -rf /tmp/review-py && mkdir -p /tmp/review-py && python3 -m zipfile -e "$here"/g23r1_op-*.whl /tmp/review-py
  echo "== G23R-1"
  REQUIRE_GPU=1 PYTHONPATH=/tmp/review-py timeout 10 python3 "$here/g23r1_repro.py"; echo "rc=$?"
  echo "== G23R-2"
  REQUIRE_GPU=1 PYTHONPATH=/tmp/review-py timeout 8 python3 "$here/g23r2_repro.py"; echo "rc=$?"
  echo "== G23R-1 (freed to the driver; last: the fault ends the process's CUDA context)"
  REQUIRE_GPU=1 PYTHONPATH=/tmp/review-py timeout 6 python3 "$here/g23r1_repro.py" fault; echo "rc=$?"
} > "$out/out.txt" 2>&1
cat "$out/out.txt"
