#!/usr/bin/env bash
# Builds the Python extension (python/ferrocuda-torch: ferrocuda kernels on PyTorch tensors and
# NumPy arrays) into an abi3 wheel with maturin, installs it into a virtual environment, and runs
# its tests. Without a GPU (CI) the NumPy tests run the kernels on the CPU executor and the
# PyTorch GPU tests skip (torch is not installed here: they run on the GPU machines, see
# docs/interop.md). Needs the device toolchain (the kernels are compiled to PTX) and PyPI
# (maturin, numpy, pytest). CARGO_TARGET_DIR defaults to this checkout's target/, so the
# ferrocuda crates already built there are reused.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
venv="${FERROCUDA_PYTHON_VENV:-$CARGO_TARGET_DIR/python-venv}"

[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "maturin>=1.5,<2" numpy pytest
rm -rf "$CARGO_TARGET_DIR/wheels/ferrocuda_torch-"*.whl
"$venv/bin/maturin" build --release --quiet -m "$root/python/ferrocuda-torch/Cargo.toml" --out "$CARGO_TARGET_DIR/wheels"
"$venv/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps "$CARGO_TARGET_DIR/wheels/ferrocuda_torch-"*.whl
cd "$root/python/ferrocuda-torch"
PYTHONDONTWRITEBYTECODE=1 "$venv/bin/python" -m pytest -q -p no:cacheprovider tests
