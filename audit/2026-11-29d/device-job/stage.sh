#!/usr/bin/env bash
# Stages the review's GPU job (audit 2026-11-29d) into .device-bin/review/ from this checkout:
# run from the checkout's root (after the fixes are merged, so that both wheels carry them).
#   audit/2026-11-29d/device-job/stage.sh
# Builds main's ferrocuda_torch wheel (scripts/build-python-wheel.sh: the library's ops, G23R-3)
# and the repro op crate audit/2026-11-29d/G23R-1/torch-op-hook (G23R-1, -2, -4; it links
# ferrocuda-torch's Rust code statically, so a wheel built before the fixes still shows them).
# A repro crate that no longer compiles (an API it uses was removed or made unsafe) is noted in
# G23R-BUILD.txt, which the job prints.
set -u
root=$PWD
dest=$root/.device-bin/review
here=$root/audit/2026-11-29d
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
venv=${FERROCUDA_PYTHON_VENV:-$CARGO_TARGET_DIR/python-venv}
mkdir -p "$dest"
rm -f "$dest"/*.whl "$dest"/G23R-BUILD.txt "$dest"/READY
cp "$here/device-job/job.sh" "$dest/"
for n in 1 2 3 4; do cp "$here/G23R-$n/repro.py" "$dest/g23r${n}_repro.py"; done
wheel=$("$root/scripts/build-python-wheel.sh" "$CARGO_TARGET_DIR/wheels" | tail -n 1)
cp "$wheel" "$dest/"
tmp=$(mktemp -d)
if "$venv/bin/maturin" build --release --quiet -m "$here/G23R-1/torch-op-hook/Cargo.toml" --out "$tmp" > "$tmp/log" 2>&1; then
  cp "$tmp"/*.whl "$dest/g23r1_op-0.1.0-cp39-abi3-manylinux_2_34_x86_64.whl"
else
  { echo "g23r1_op did not build against this checkout:"; grep -E '^(error|warning: unused)' -A6 "$tmp/log" | head -40; } > "$dest/G23R-BUILD.txt"
fi
rm -rf "$tmp"
ls -la "$dest"
