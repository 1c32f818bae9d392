#!/usr/bin/env bash
# Builds the Python extension (python/ferrocuda-torch) into an abi3 wheel with maturin, in
# OUT_DIR (any older ferrocuda_torch wheel there is removed first), and prints the wheel's path
# as the last line. Used by scripts/check-python.sh (CI) and scripts/gpu-run/stage.sh (the GPU
# machine's copy), so both build it the same way.
#
# usage: scripts/build-python-wheel.sh OUT_DIR [PIP_PACKAGE...]
#
# The virtual environment is FERROCUDA_PYTHON_VENV (default: $CARGO_TARGET_DIR/python-venv, made
# if missing); maturin and the PIP_PACKAGEs given (e.g. numpy pytest for the tests) are
# installed into it from PyPI. CARGO_TARGET_DIR defaults to this checkout's target/, so the
# ferrocuda crates already built there are reused. Needs the device toolchain (the kernels are
# compiled to PTX).
set -euo pipefail

if [ $# -lt 1 ]; then
  echo "usage: $0 OUT_DIR [PIP_PACKAGE...]" >&2
  exit 2
fi
out=$1
shift
root=$(cd "$(dirname "$0")/.." && pwd)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
venv="${FERROCUDA_PYTHON_VENV:-$CARGO_TARGET_DIR/python-venv}"

[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "maturin>=1.5,<2" "$@"
mkdir -p "$out"
rm -f "$out/ferrocuda_torch-"*.whl
"$venv/bin/maturin" build --release --quiet -m "$root/python/ferrocuda-torch/Cargo.toml" --out "$out" >&2
wheels=("$out/ferrocuda_torch-"*.whl)
if [ ${#wheels[@]} -ne 1 ] || [ ! -f "${wheels[0]}" ]; then
  echo "build-python-wheel: expected one ferrocuda_torch wheel in $out, found: ${wheels[*]}" >&2
  exit 1
fi
echo "${wheels[0]}"
