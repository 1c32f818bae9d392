#!/bin/bash
# GPU job of helper review (session 24): G24R-1's repro (audit/2026-11-29f/G24R-1/repro.py) with
# main's g23r_torch_op wheel (built 09:31 from main, session 23's fixes in; ferrocuda_torch itself is not imported: G23L-1).
# At most ~30 s. Results under $OUT/review/.
set -u
export PYTHONDONTWRITEBYTECODE=1
HERE=$(cd "$(dirname "$0")" && pwd)
R="$OUT/review"; mkdir -p "$R"
py=/opt/torch/.venv/bin/python; [ -x "$py" ] || py=python3
nvidia-smi -L > "$R/gpu.txt" 2>&1
"$py" -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__)" >> "$R/gpu.txt" 2>&1
lib=$(mktemp -d)
for w in "$HERE"/*.whl; do "$py" -m zipfile -e "$w" "$lib"; done
step() { local name=$1 limit=$2; shift 2; { echo "== $name ($(date +%T))"; timeout "$limit" "$@" 2>&1; echo "rc=$? $name"; } >> "$R/g24r1.txt"; }
step "G24R-1 control hook nohook hook nohook" 12 env PYTHONPATH="$lib" "$py" "$HERE/g24r1_repro.py" control hook nohook hook nohook
step "G24R-1 fault (alone: ends the context)" 8 env PYTHONPATH="$lib" "$py" "$HERE/g24r1_repro.py" fault
rm -rf "$lib"
cat "$R/gpu.txt" "$R/g24r1.txt"
