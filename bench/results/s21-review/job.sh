#!/bin/bash
# Held-out review, session 21: G21R-1 live (torch CPU tensors; the main wheel of 23:20).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
R="$OUT/review"; mkdir -p "$R"
py=/opt/torch/.venv/bin/python; [ -x "$py" ] || py=python3
nvidia-smi -L > "$R/gpu.txt" 2>&1; nproc >> "$R/gpu.txt"
lib=$(mktemp -d); "$py" -m zipfile -e "$HERE"/wheel/*.whl "$lib"
"$py" -c "import torch; print('torch', torch.__version__)" >> "$R/gpu.txt" 2>&1
step() { local name=$1 limit=$2; shift 2; echo "== $name ($(date +%T))" >> "$R/log.txt"; timeout "$limit" "$@" >> "$R/log.txt" 2>&1; echo "rc=$? $name" >> "$R/log.txt"; }
step "G21R-1 attack (resize_ on another thread)" 30 env REQUIRE_GPU=1 PYTHONPATH="$lib" "$py" "$HERE/g21r1.py" attack 18
step "G21R-1 control (same loop, no free)" 22 env REQUIRE_GPU=1 PYTHONPATH="$lib" "$py" "$HERE/g21r1.py" control 12
step "G21R-1 attack again" 20 env REQUIRE_GPU=1 PYTHONPATH="$lib" "$py" "$HERE/g21r1.py" attack 10
cat "$R/gpu.txt" "$R/log.txt"
