#!/bin/bash
# GPU job of helper torch (session 24), staged in .device-bin/torch/ by stage.sh beside it:
# wheel/ (the branch's ferrocuda_torch), op/ (the g23r_op test extension), baseline/ (main's
# ferrocuda_torch), pywheels/ (pytest), tests/ (python/ferrocuda-torch/tests). At most ~88 s.
# - the whole python/ferrocuda-torch/tests suite in ONE pytest process, REQUIRE_GPU=1, with the
#   g23r_op extension importable (G23L-1 fixed: both extensions in one process);
# - beside it, the overhead A/B (overhead.py): main's wheel, then the branch's, in separate
#   processes.
# Results under $OUT/torch/ (gpu.txt, pytest.txt, overhead.txt) and $OUT/torch.tar.gz.
set -u
export PYTHONDONTWRITEBYTECODE=1
HERE=$(cd "$(dirname "$0")" && pwd)
R="$OUT/torch"; mkdir -p "$R"
py=${JOB_PYTHON:-/opt/torch/.venv/bin/python}; [ -x "$py" ] || py=python3 # JOB_PYTHON: a local try-out
{ nvidia-smi -L; "$py" -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__)"; cat "$HERE/commit.txt"; } > "$R/gpu.txt" 2>&1
lib=$(mktemp -d); op=$(mktemp -d); base=$(mktemp -d)
for w in "$HERE"/wheel/*.whl "$HERE"/pywheels/*.whl; do "$py" -m zipfile -e "$w" "$lib"; done
"$py" -m zipfile -e "$HERE"/op/*.whl "$op"
"$py" -m zipfile -e "$HERE"/baseline/*.whl "$base"
step() { local log=$1 name=$2 limit=$3; shift 3; { echo "== $name ($(date +%T))"; timeout "$limit" "$@" 2>&1; echo "rc=$? $name ($(date +%T))"; } >> "$R/$log.txt"; }
export REQUIRE_GPU=1
# The files that prove the point first (G23L-1's, the g23r_op extension's, the ops'), then the
# rest: the whole suite takes longer than this job may (about 100 s on the H200), so what did not
# run in time is named in pytest.txt; scripts/gpu-run/run.sh runs it all (300 s).
first="test_g23l1_two_extensions.py test_g23r_fixes.py test_ops_registration.py test_ops.py test_torch.py test_g20r.py"
rest=$(cd "$HERE/tests" && ls test_*.py | grep -v -x -F -f <(tr ' ' '\n' <<< "$first") | tr '\n' ' ')
per_test=(); "$py" -c "import pytest_timeout" 2>/dev/null && per_test=(--timeout=45)
( cd "$HERE/tests" && step pytest "pytest (REQUIRE_GPU=1), the whole suite in one process" 84 env G23R_OP_PATH="$op" PYTHONPATH="$lib:$op" \
    "$py" -m pytest -v -rfEs -p no:cacheprovider --durations=12 "${per_test[@]}" $first $rest ) &
sleep 1
step overhead "overhead A/B: main's wheel" 36 env PYTHONPATH="$base" "$py" "$HERE/overhead.py" main --calls 2000
step overhead "overhead A/B: the branch's wheel" 40 env PYTHONPATH="$lib:$op" "$py" "$HERE/overhead.py" s24 --op-module g23r_op --calls 2000
wait
cd "$OUT" && tar -czf torch.tar.gz torch
cd "$R" && cat gpu.txt && cat overhead.txt && grep -E "passed|failed|FAILED|ERROR|rc=|Error|assert" pytest.txt | tail -n 40
