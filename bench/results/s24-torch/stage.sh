#!/bin/bash
# Stages the GPU job of helper torch (session 24) in /work/main/.device-bin/torch/ (or $1): the
# branch's ferrocuda_torch wheel (scripts/build-python-wheel.sh), the g23r_op test extension's
# wheel (python/ferrocuda-torch/tests/g23r_op, maturin), pytest's wheels, the tests, overhead.py
# and job.sh; baseline/ holds main's ferrocuda_torch wheel for the overhead A/B (BASELINE_WHEEL:
# scripts/build-python-wheel.sh run on main's sources). Run from the worktree's root;
# FERROCUDA_PYTHON_VENV must have maturin (default $CARGO_TARGET_DIR/python-venv, made by
# build-python-wheel.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
here="$root/bench/results/s24-torch"
dest=${1:-/work/main/.device-bin/torch}
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
export FERROCUDA_PYTHON_VENV="${FERROCUDA_PYTHON_VENV:-$CARGO_TARGET_DIR/python-venv}"
venv=$FERROCUDA_PYTHON_VENV
rm -rf "$dest" && mkdir -p "$dest"/{wheel,op,baseline,pywheels}
"$root/scripts/build-python-wheel.sh" "$dest/wheel" >/dev/null
"$venv/bin/maturin" build --release --quiet -m "$root/python/ferrocuda-torch/tests/g23r_op/Cargo.toml" --out "$dest/op"
"$venv/bin/pip" download --quiet --disable-pip-version-check --only-binary=:all: --dest "$dest/pywheels" pytest
cp "${BASELINE_WHEEL:?set BASELINE_WHEEL to a ferrocuda_torch wheel built from main}" "$dest/baseline/"
cp -r "$root/python/ferrocuda-torch/tests" "$dest/tests"
rm -rf "$dest/tests/g23r_op" # its source folder would shadow the built module (a namespace package)
cp "$here/overhead.py" "$here/job.sh" "$dest/"
git -C "$root" rev-parse HEAD > "$dest/commit.txt"
git -C "$root" status --short -- python scripts > "$dest/uncommitted.txt"
echo "staged in $dest ($(du -sh "$dest" | cut -f1))"
