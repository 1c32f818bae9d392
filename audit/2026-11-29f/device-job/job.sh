#!/bin/bash
# GPU job of helper review (session 24, audit/2026-11-29f): G24R-1 (the at-use check lets the GIL
# go between two tensors' checks) with the G23R op crate's wheel, and G24R-2 (nested Call::with
# lend overlapping slices to one launch) with its own op crate's wheel, when staged (stage.sh
# beside this file builds both). ferrocuda_torch itself is not imported (G23L-1). At most ~30 s.
# Results under $OUT/review/; stdout ends with them. Each case prints UNSOUND or HELD.
set -u
export PYTHONDONTWRITEBYTECODE=1
HERE=$(cd "$(dirname "$0")" && pwd)
R="$OUT/review"; mkdir -p "$R"
py=/opt/torch/.venv/bin/python; [ -x "$py" ] || py=python3
nvidia-smi -L > "$R/gpu.txt" 2>&1
"$py" -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__)" >> "$R/gpu.txt" 2>&1
step() { local log=$1 name=$2 limit=$3; shift 3; { echo "== $name ($(date +%T))"; timeout "$limit" "$@" 2>&1; echo "rc=$? $name"; } >> "$R/$log.txt"; }
g23r=$(mktemp -d)
for w in "$HERE"/g23r_torch_op-*.whl; do "$py" -m zipfile -e "$w" "$g23r"; done
step g24r1 "G24R-1 control hook nohook hook" 11 env PYTHONPATH="$g23r" "$py" "$HERE/g24r1_repro.py" control hook nohook hook
if ls "$HERE"/g24r2_torch_op-*.whl >/dev/null 2>&1; then
  g24r2=$(mktemp -d)
  for w in "$HERE"/g24r2_torch_op-*.whl; do "$py" -m zipfile -e "$w" "$g24r2"; done
  step g24r2 "G24R-2 nested calls" 6 env PYTHONPATH="$g24r2" "$py" "$HERE/g24r2_repro.py"
  rm -rf "$g24r2"
elif [ -f "$HERE/G24R-2-BUILD.txt" ]; then
  { echo "== G24R-2: the op crate did not build against this commit"; tail -n 20 "$HERE/G24R-2-BUILD.txt"; } >> "$R/g24r2.txt"
fi
# Last, in its own process: a fault ends the CUDA context.
step g24r1 "G24R-1 fault (alone: ends the context)" 7 env PYTHONPATH="$g23r" "$py" "$HERE/g24r1_repro.py" fault
rm -rf "$g23r"
cat "$R/gpu.txt" "$R"/g24r*.txt
