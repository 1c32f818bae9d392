#!/bin/bash
# GPU job of helper fixtorch (session 23): ferrocuda-torch with the G23R-1..4 fixes. Staged in
# .device-bin/fixtorch/ by stage.sh beside it: wheel/ (the fixed ferrocuda_torch), op/ (the G23R
# op crate, python/ferrocuda-torch/tests/g23r_op), baseline/ (main's ferrocuda_torch and the
# review's g23r1_op, for the overhead A/B), pywheels/ (pytest), tests/, the review's repros adapted
# (g23r*_repro.py: `held` expected). At most ~60 s; results under $OUT/fixtorch/ and one tarball
# $OUT/fixtorch.tar.gz of them.
set -u
export PYTHONDONTWRITEBYTECODE=1
HERE=$(cd "$(dirname "$0")" && pwd)
R="$OUT/fixtorch"; mkdir -p "$R"
py=/opt/torch/.venv/bin/python; [ -x "$py" ] || py=python3
nvidia-smi -L > "$R/gpu.txt" 2>&1
"$py" -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__)" >> "$R/gpu.txt" 2>&1
lib=$(mktemp -d); op=$(mktemp -d); base=$(mktemp -d); baseop=$(mktemp -d)
for w in "$HERE"/wheel/*.whl "$HERE"/pywheels/*.whl; do "$py" -m zipfile -e "$w" "$lib"; done
"$py" -m zipfile -e "$HERE"/op/*.whl "$op"
"$py" -m zipfile -e "$HERE"/baseline/ferrocuda_torch-*.whl "$base"
"$py" -m zipfile -e "$HERE"/baseline/g23r1_op-*.whl "$baseop"
step() { local log=$1 name=$2 limit=$3; shift 3; { echo "== $name ($(date +%T))"; timeout "$limit" "$@" 2>&1; echo "rc=$? $name"; } >> "$R/$log.txt"; }
# The whole suite in the background (its slowest files), the rest in order beside it.
( cd "$HERE/tests" && step pytest-ops "pytest (REQUIRE_GPU=1): ops, ops_registration" 52 env REQUIRE_GPU=1 PYTHONPATH="$lib" "$py" -m pytest -q -rs -p no:cacheprovider test_ops_registration.py test_ops.py ) &
export REQUIRE_GPU=1
( step overhead "A/B per call: main's wheels, then the fixed ones" 45 bash -c "
  PYTHONPATH='$base' '$py' '$HERE/overhead.py' gelu ferrocuda_torch; PYTHONPATH='$lib' '$py' '$HERE/overhead.py' gelu ferrocuda_torch
  PYTHONPATH='$baseop' '$py' '$HERE/overhead.py' hook g23r1_op; PYTHONPATH='$op:$lib' '$py' '$HERE/overhead.py' hook g23r_op" ) &
step repro "G23R-1 (fixed)" 10 env PYTHONPATH="$op:$lib" "$py" "$HERE/g23r1_repro.py"
step repro "G23R-4 (fixed)" 7 env PYTHONPATH="$op:$lib" "$py" "$HERE/g23r4_repro.py"
step repro "G23R-2 (fixed)" 7 env PYTHONPATH="$op:$lib" "$py" "$HERE/g23r2_repro.py"
step repro "G23R-3 (fixed)" 7 env PYTHONPATH="$lib" "$py" "$HERE/g23r3_repro.py"
cd "$HERE/tests"
step pytest "pytest (REQUIRE_GPU=1): g23r, then the other files" $((52 - SECONDS > 10 ? 52 - SECONDS : 10)) env G23R_OP_PATH="$op" PYTHONPATH="$lib" "$py" -m pytest -q -rs -p no:cacheprovider test_g23r_fixes.py test_g21r.py test_g20r.py test_s22.py test_s21.py test_dlpack_release.py test_g18r.py test_torch.py test_numpy.py
wait
if [ "$SECONDS" -lt 54 ]; then
  step repro "G23R-1 freed to the driver (fixed; last: a fault would end the context)" $((60 - SECONDS)) env PYTHONPATH="$op:$lib" "$py" "$HERE/g23r1_repro.py" fault
else
  echo "== G23R-1 freed-to-the-driver case skipped: ${SECONDS} s used" >> "$R/repro.txt"
fi
cd "$OUT" && tar -czf fixtorch.tar.gz fixtorch
cd "$R" && tail -n 60 gpu.txt repro.txt overhead.txt pytest.txt pytest-ops.txt
