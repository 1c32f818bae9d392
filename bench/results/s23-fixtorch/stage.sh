#!/bin/bash
# Stages the GPU job of helper fixtorch (session 23) in /work/main/.device-bin/fixtorch/ (or $1):
# the fixed ferrocuda_torch wheel (scripts/build-python-wheel.sh), the G23R op crate's wheel
# (python/ferrocuda-torch/tests/g23r_op, maturin), pytest's wheels, the tests, the review's
# repros (audit/2026-11-29d/G23R-*/repro.py, the op module renamed), overhead.py and job.sh; baseline/ holds main's
# ferrocuda_torch wheel and the review's g23r1_op wheel as the review staged them
# (.device-bin/review/), for the overhead A/B. Run from the worktree's root.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
here="$root/bench/results/s23-fixtorch"
dest=${1:-/work/main/.device-bin/fixtorch}
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
export FERROCUDA_PYTHON_VENV="${FERROCUDA_PYTHON_VENV:-$CARGO_TARGET_DIR/python-venv}"
venv=$FERROCUDA_PYTHON_VENV
rm -rf "$dest" && mkdir -p "$dest"/{wheel,op,baseline,pywheels}
"$root/scripts/build-python-wheel.sh" "$dest/wheel" >/dev/null
"$venv/bin/maturin" build --release --quiet -m "$root/python/ferrocuda-torch/tests/g23r_op/Cargo.toml" --out "$dest/op"
"$venv/bin/pip" download --quiet --disable-pip-version-check --only-binary=:all: --dest "$dest/pywheels" pytest
cp /work/main/.device-bin/review/ferrocuda_torch-*.whl /work/main/.device-bin/review/g23r1_op-*.whl "$dest/baseline/"
cp -r "$root/python/ferrocuda-torch/tests" "$dest/tests"
rm -rf "$dest/tests/g23r_op"
# The review's repros as the audit keeps them, the op module's name changed to the test crate's
# (`g23r_op`, which registers the same torch.ops.g23r1.* ops) and nothing else.
for n in 1 2 3 4; do
  sed 's/^import g23r1_op\b/import g23r_op as g23r1_op/' "$root/audit/2026-11-29d/G23R-$n/repro.py" > "$dest/g23r${n}_repro.py"
done
cp "$here/overhead.py" "$here/job.sh" "$dest/"
git -C "$root" rev-parse HEAD > "$dest/commit.txt"
echo "staged in $dest ($(du -sh "$dest" | cut -f1))"
