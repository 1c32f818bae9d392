#!/bin/bash
# Stages the GPU job of the session-24 review (audit 2026-11-29f) in /work/main/.device-bin/review/
# (or $1): the G23R op crate's wheel (G24R-1's repro drives its ops) and G24R-2's op crate's wheel,
# both built with maturin from this checkout (so: from merged main, after any fix), the two
# repros and job.sh. Run from the checkout's root once its target/ holds a device build.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
here="$root/audit/2026-11-29f"
dest=${1:-/work/main/.device-bin/review}
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
venv="${FERROCUDA_PYTHON_VENV:-$CARGO_TARGET_DIR/python-venv}"
[ -x "$venv/bin/maturin" ] || { "$venv/bin/pip" install --quiet --disable-pip-version-check "maturin>=1.5,<2"; }
rm -rf "$dest" && mkdir -p "$dest"
"$venv/bin/maturin" build --release --quiet -m "$root/python/ferrocuda-torch/tests/g23r_op/Cargo.toml" --out "$dest"
# A fix that refuses nested calls at compile time (or renames Call::with) shows here: the job
# then reports the build's failure instead of running the G24R-2 repro.
if ! "$venv/bin/maturin" build --release --quiet -m "$here/G24R-2/op/Cargo.toml" --out "$dest" 2> "$dest/G24R-2-BUILD.txt"; then
  echo "G24R-2's op crate did not build (see G24R-2-BUILD.txt)"
fi
cp "$here/G24R-1/repro.py" "$dest/g24r1_repro.py"
cp "$here/G24R-2/repro.py" "$dest/g24r2_repro.py"
cp "$here/device-job/job.sh" "$dest/job.sh"
git -C "$root" rev-parse HEAD > "$dest/commit.txt"
echo "staged in $dest ($(du -sh "$dest" | cut -f1))"
