#!/bin/bash
# GPU job of helper fixpy (session 20): the ferrocuda-torch wheel with the G20R-2/G20R-3 fixes,
# staged in .device-bin/fixpy/ by stage.sh beside it. Results under $OUT/fixpy/ (and a tar).
# Order: what matters most first (each step has its own timeout; the whole fits in 80 s).
set -u
export REQUIRE_GPU=1 PYTHONDONTWRITEBYTECODE=1
HERE=$(cd "$(dirname "$0")" && pwd)
R="$OUT/fixpy"; mkdir -p "$R"
py=/opt/torch/.venv/bin/python; [ -x "$py" ] || py=python3
nvidia-smi -L > "$R/gpu.txt" 2>&1
lib=$(mktemp -d); base=$(mktemp -d)
for w in "$HERE"/wheel/*.whl "$HERE"/pywheels/*.whl; do "$py" -m zipfile -e "$w" "$lib"; done
"$py" -m zipfile -e "$HERE"/baseline/*.whl "$base"
step() { local name=$1 limit=$2; shift 2; echo "== $name ($(date +%T))" >> "$R/log.txt"; timeout "$limit" "$@" >> "$R/log.txt" 2>&1; echo "rc=$? $name" >> "$R/log.txt"; }
step "review repro g20r2 (new wheel)" 15 env PYTHONPATH="$lib" "$py" "$HERE/g20r2.py"
step "review repro g20r3 (new wheel)" 20 env PYTHONPATH="$lib" "$py" "$HERE/g20r3.py"
cd "$HERE/tests"
step "pytest: g20r, dlpack_release, g18r, torch, numpy" 30 env PYTHONPATH="$lib" "$py" -m pytest -q -rs -p no:cacheprovider test_g20r.py test_dlpack_release.py test_g18r.py test_torch.py test_numpy.py
step "overhead: baseline wheel (session 18)" 12 env PYTHONPATH="$base" "$py" "$HERE/bench_overhead.py" baseline
step "overhead: new wheel" 12 env PYTHONPATH="$lib" "$py" "$HERE/bench_overhead.py" new
step "pytest: ops, ops_registration (what time is left)" 25 env PYTHONPATH="$lib" "$py" -m pytest -q -x -rs -p no:cacheprovider test_ops_registration.py test_ops.py
cat "$R/log.txt"
