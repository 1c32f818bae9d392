#!/usr/bin/env bash
# Builds the Python extension (python/ferrocuda-torch: ferrocuda kernels on PyTorch tensors and
# NumPy arrays) into an abi3 wheel with maturin (scripts/build-python-wheel.sh, which
# scripts/gpu-run/stage.sh uses too), installs it into a virtual environment, and runs its
# tests. Without a GPU (CI) the NumPy tests run the kernels on the CPU executor and the PyTorch
# GPU tests skip (torch is not installed here: they run on the GPU machines, see
# docs/interop.md). Needs the device toolchain (the kernels are compiled to PTX) and PyPI
# (maturin, numpy, pytest). CARGO_TARGET_DIR defaults to this checkout's target/, so the
# ferrocuda crates already built there are reused.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
# One virtual environment for the wheel's build and the tests (build-python-wheel.sh makes it).
export FERROCUDA_PYTHON_VENV="${FERROCUDA_PYTHON_VENV:-$CARGO_TARGET_DIR/python-venv}"
venv=$FERROCUDA_PYTHON_VENV

wheel=$("$root/scripts/build-python-wheel.sh" "$CARGO_TARGET_DIR/wheels" numpy pytest | tail -n 1)
"$venv/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheel"
cd "$root/python/ferrocuda-torch"
PYTHONDONTWRITEBYTECODE=1 "$venv/bin/python" -m pytest -q -p no:cacheprovider tests

# The G23R regression tests' op crate (python/ferrocuda-torch/tests/g23r_op: an op author's safe
# Rust that runs Python code, lets the GIL go, keeps the call's stream; audit 2026-11-29d), built
# in place into a wheel (so CI compiles it against this checkout's API); with torch importable,
# unpacked and named to tests/test_g23r_fixes.py (its GPU cases skip without a GPU).
# FERROCUDA_SKIP_TORCH_OP=1 skips it too.
if [ "${FERROCUDA_SKIP_TORCH_OP:-0}" != 1 ]; then
  rm -rf "$CARGO_TARGET_DIR/wheels/g23r_torch_op-"*.whl
  "$venv/bin/maturin" build --release --quiet -m "$root/python/ferrocuda-torch/tests/g23r_op/Cargo.toml" --out "$CARGO_TARGET_DIR/wheels"
  if "$venv/bin/python" -c "import torch" 2>/dev/null; then
    g23r_op=$(mktemp -d "${TMPDIR:-/tmp}/ferrocuda-g23r-op.XXXXXX")
    "$venv/bin/python" -m zipfile -e "$CARGO_TARGET_DIR/wheels/g23r_torch_op-"*.whl "$g23r_op"
    (cd "$root/python/ferrocuda-torch" && G23R_OP_PATH="$g23r_op" PYTHONDONTWRITEBYTECODE=1 "$venv/bin/python" -m pytest -q -p no:cacheprovider -rs tests/test_g23r_fixes.py tests/test_g24r_fixes.py)
    rm -rf "$g23r_op"
  fi
fi

# templates/torch-op, as a user builds it: copied out of this checkout, its ferrocuda
# dependencies pointed here (`"0.1"` -> a path), built into a wheel by maturin (what
# `pip install .` runs). With torch importable, the wheel is installed and its tests run (the
# GPU ones skip without a GPU); CI has no torch, so there it is the build alone.
# FERROCUDA_SKIP_TORCH_OP=1 skips it.
if [ "${FERROCUDA_SKIP_TORCH_OP:-0}" != 1 ]; then
  work=$(mktemp -d "${TMPDIR:-/tmp}/ferrocuda-torch-op.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  cp -r "$root/templates/torch-op" "$work/"
  op="$work/torch-op"
  sed -i -E "s|^ferrocuda-torch = \{ version = \"([^\"]+)\", default-features = false \}|ferrocuda-torch = { version = \"\\1\", path = \"$root/python/ferrocuda-torch\", default-features = false }|" "$op/Cargo.toml"
  declare -A dirs=([ferrocuda-device]=device [ferrocuda-builder]=builder [ferrocuda-host]=host)
  for manifest in "$op/Cargo.toml" "$op/kernels/Cargo.toml"; do
    for crate in "${!dirs[@]}"; do
      sed -i -E "s|^${crate} = \"([^\"]+)\"|${crate} = { version = \"\\1\", path = \"$root/${dirs[$crate]}\" }|" "$manifest"
    done
    if grep -nE '^ferrocuda[a-z-]* = (\{ version = "[^"]+", default|")' "$manifest"; then
      echo "check-python: a ferrocuda dependency in $manifest was not rewritten" >&2
      exit 1
    fi
  done
  # The same dependency versions as the extension above and the workspace: no new resolution.
  cp "$root/python/ferrocuda-torch/Cargo.lock" "$op/Cargo.lock"
  cp "$root/Cargo.lock" "$op/kernels/Cargo.lock"
  rm -rf "$CARGO_TARGET_DIR/wheels/my_torch_op-"*.whl
  start=$SECONDS
  "$venv/bin/maturin" build --release --quiet -m "$op/Cargo.toml" --out "$CARGO_TARGET_DIR/wheels"
  echo "check-python: templates/torch-op built in $((SECONDS - start)) s"
  if "$venv/bin/python" -c "import torch" 2>/dev/null; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps "$CARGO_TARGET_DIR/wheels/my_torch_op-"*.whl
    (cd "$op" && PYTHONDONTWRITEBYTECODE=1 "$venv/bin/python" -m pytest -q -p no:cacheprovider -rs tests)
  else
    echo "check-python: torch is not installed here: templates/torch-op was built, its tests not run (they run where torch is)"
  fi
fi
