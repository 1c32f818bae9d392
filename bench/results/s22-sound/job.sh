#!/bin/bash
# Session 22 "sound": the GPU checks of the soundness round, staged for the lead's final call.
#   bash .device-bin/sound/job.sh       (from the repository root on the GPU machine)
# Runs, each under its own timeout (about 40 s in all), with REQUIRE_GPU=1 (a skip is a failure):
#   host/tests/gpu_s22            (class 1: calls on a primary context restore the thread's
#                                  current context; prints the bind's push/pop cost)
#   tests/gpu_contexts            (contexts, push/pop, recovery in child processes)
#   tests/gpu_g20r  g20r4 g21_     (G20R-4 and session 21's current-context tests, re-run
#                                  because the bind changed)
#   collectives gpu_s21_current   (peer all-reduce and NCCL leave the current context)
#   python: test_s21.py, test_s22.py (class 1 in ferrocuda-torch, class 3), test_g21r.py's
#           dispatch-guard cases, and test_ops.py's rmsnorm/zero-copy/captured-graph cases
#           (class 2: ops lend TensorSlice/TensorSliceMut now)
# Writes $OUT/sound/*.txt and prints one PASS/FAIL line per part.
set -u
here=$(cd "$(dirname "$0")" && pwd)
O=${OUT:-/tmp/sound22}/sound
mkdir -p "$O"
w=$(mktemp -d)
tar -xJf "$here/bins.tar.xz" -C "$w"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$O/gpu.txt" 2>&1
cat "$O/gpu.txt"
fails=0
run() {
  local name=$1 limit=$2 bin=$3
  shift 3
  REQUIRE_GPU=1 RUST_BACKTRACE=0 timeout -k 2 "$limit" "$w/$bin" "$@" --nocapture --test-threads=1 > "$O/$name.txt" 2>&1
  local rc=$?
  if [ $rc -eq 0 ] && ! grep -q '^SKIPPED' "$O/$name.txt"; then
    echo "$name PASS ($(grep -o 'test result: .*passed' "$O/$name.txt" | tail -1))"
  else
    echo "$name FAIL (exit $rc)"; grep -E '^(test .* FAILED|thread .* panicked|SKIPPED)' "$O/$name.txt" | head -5
    fails=$((fails + 1))
  fi
}
run gpu_s22 10 gpu_s22
grep -o 's22 bind cost: .*' "$O/gpu_s22.txt"
run gpu_contexts 15 gpu_contexts
run gpu_g20r 10 gpu_g20r g20r4 g21_
run gpu_s21_current 10 gpu_s21_current

py=/opt/torch/.venv/bin/python; [ -x "$py" ] || py=python3
for f in "$here"/ferrocuda_torch-*.whl; do "$py" -m zipfile -e "$f" "$w/lib"; done
cd "$here/python-tests"
pyrun() {
  local name=$1 limit=$2
  shift 2
  REQUIRE_GPU=1 PYTHONPATH="$w/lib" PYTHONDONTWRITEBYTECODE=1 timeout -k 2 "$limit" "$py" -m pytest -q -rs -p no:cacheprovider "$@" > "$O/$name.txt" 2>&1
  local rc=$?
  if [ $rc -eq 0 ] && ! grep -q 'SKIPPED' "$O/$name.txt"; then
    echo "$name PASS ($(tail -1 "$O/$name.txt"))"
  else
    echo "$name FAIL (exit $rc)"; grep -E '^(FAILED|ERROR|SKIPPED)' "$O/$name.txt" | head -8
    fails=$((fails + 1))
  fi
}
pyrun python-s21-s22 25 test_s21.py test_s22.py
pyrun python-g21r-dispatch 20 test_g21r.py -k "dispatch or tensorbase_rebound"
pyrun python-ops 25 test_ops.py -k "rmsnorm_and or zero_copy or captured_graph_replays"
echo "sound job: $fails part(s) failed"
rm -rf "$w"
[ $fails -eq 0 ]
