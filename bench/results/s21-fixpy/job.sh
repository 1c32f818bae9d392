#!/bin/bash
# GPU job of helper fixpy (session 21): the ferrocuda-torch wheel with the G21R-1/G21R-2 fixes
# and the GC pause, staged in .device-bin/fixpy/ by stage.sh beside it; `baseline/` is main's
# wheel of e62e36e (before the fixes), for the review's repros. Results under $OUT/fixpy/.
# The repros run in the background while the test suite runs (two pytest processes); every
# step has its own timeout, and the whole fits in 95 s.
set -u
export PYTHONDONTWRITEBYTECODE=1
HERE=$(cd "$(dirname "$0")" && pwd)
R="$OUT/fixpy"; mkdir -p "$R"
py=/opt/torch/.venv/bin/python; [ -x "$py" ] || py=python3
nvidia-smi -L > "$R/gpu.txt" 2>&1
"$py" -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__)" >> "$R/gpu.txt" 2>&1
lib=$(mktemp -d); base=$(mktemp -d)
for w in "$HERE"/wheel/*.whl "$HERE"/pywheels/*.whl; do "$py" -m zipfile -e "$w" "$lib"; done
"$py" -m zipfile -e "$HERE"/baseline/*.whl "$base"
step() { local log=$1 name=$2 limit=$3; shift 3; { echo "== $name ($(date +%T))"; timeout "$limit" "$@" 2>&1; echo "rc=$? $name"; } >> "$R/$log.txt"; }
A="$HERE/audit"
step probe "facts: torch's types" 20 env PYTHONPATH="$lib" "$py" "$HERE/probe.py"
( step repro "G21R-2 repro_real_torch, baseline wheel" 20 env PYTHONPATH="$base" "$py" "$A/repro_real_torch.py"
  step repro "G21R-2 repro_real_torch, fixed wheel" 20 env PYTHONPATH="$lib" "$py" "$A/repro_real_torch.py"
  step repro "G21R-1 repro attack 12 s, fixed wheel" 25 env PYTHONPATH="$lib" "$py" "$A/repro.py" attack 12 ) &
( step gc "open-gc-finalizers repro_torch, fixed wheel" 55 env PYTHONPATH="$lib" "$py" "$A/repro_torch.py"
  step gc "G21R-1 repro attack 8 s, baseline wheel (control of the repro)" 14 env PYTHONPATH="$base" "$py" "$A/repro.py" attack 8 ) &
cd "$HERE/tests"
( step pytest-ops "pytest (REQUIRE_GPU=1): ops, ops_registration" 80 env REQUIRE_GPU=1 PYTHONPATH="$lib" "$py" -m pytest -q -rs -p no:cacheprovider test_ops_registration.py test_ops.py ) &
step pytest "pytest (REQUIRE_GPU=1): g21r, g20r, dlpack_release, g18r, torch, numpy" 80 env REQUIRE_GPU=1 PYTHONPATH="$lib" "$py" -m pytest -q -rs -p no:cacheprovider test_g21r.py test_g20r.py test_dlpack_release.py test_g18r.py test_torch.py test_numpy.py
wait
cd "$R" && tail -n 40 probe.txt repro.txt gc.txt pytest.txt pytest-ops.txt
