#!/usr/bin/env bash
# audit 2026-11-29d (review): the held-out review's GPU repros, staged as
# /work/main/.device-bin/review/: this file, g23r1_repro.py, g23r2_repro.py, g23r3_repro.py, g23r4_repro.py,
# the g23r1_op wheel (audit/2026-11-29d/G23R-1/torch-op-hook, built with maturin) and main's
# ferrocuda_torch wheel (scripts/build-python-wheel.sh), both staged by device-job/stage.sh. At most ~25 s; writes
# $OUT/review/out.txt. Needs no cargo or network (the wheels are abi3: unpacked onto PYTHONPATH).
set -u
here=$(cd "$(dirname "$0")" && pwd)
out="${OUT:-/tmp/review-out}/review"
mkdir -p "$out"
{
  echo "== nvidia-smi"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -2
  rm -rf /tmp/review-py /tmp/review-ft && mkdir -p /tmp/review-py /tmp/review-ft
  [ -f "$here/G23R-BUILD.txt" ] && cat "$here/G23R-BUILD.txt"
  for w in "$here"/g23r1_op-*.whl; do [ -f "$w" ] && python3 -m zipfile -e "$w" /tmp/review-py; done
  python3 -m zipfile -e "$here"/ferrocuda_torch-*.whl /tmp/review-ft
  echo "== G23R-1, G23R-4 and G23R-2 (one process; G23R-2 last: its replay may fault)"
  REQUIRE_GPU=1 PYTHONPATH=/tmp/review-py timeout 11 python3 -c "import runpy, sys; sys.argv = ['g23r1']; runpy.run_path('$here/g23r1_repro.py'); print('== G23R-4'); runpy.run_path('$here/g23r4_repro.py'); print('== G23R-2'); runpy.run_path('$here/g23r2_repro.py')"; echo "rc=$?"
  echo "== G23R-3 (ferrocuda_torch's own op, pure Python)"
  REQUIRE_GPU=1 PYTHONPATH=/tmp/review-ft timeout 8 python3 "$here/g23r3_repro.py"; echo "rc=$?"
  if [ "$SECONDS" -lt 15 ]; then
    echo "== G23R-1 (freed to the driver; last: the fault ends the process's CUDA context)"
    REQUIRE_GPU=1 PYTHONPATH=/tmp/review-py timeout $((24 - SECONDS)) python3 "$here/g23r1_repro.py" fault; echo "rc=$?"
  else
    echo "== G23R-1 freed-to-the-driver case skipped: ${SECONDS} s used"
  fi
} > "$out/out.txt" 2>&1
cat "$out/out.txt"
# One file back (the tool keeps few files): the folder as one archive.
tar cJf "${OUT:-/tmp/review-out}/review.tar.xz" -C "${OUT:-/tmp/review-out}" review && rm -rf "$out"
