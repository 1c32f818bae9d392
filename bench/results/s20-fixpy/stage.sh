#!/bin/bash
# Stages the GPU job of helper fixpy into /work/main/.device-bin/fixpy (run from the worktree
# after `maturin build --release -m python/ferrocuda-torch/Cargo.toml --out target/wheels-fixpy`).
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
dest=/work/main/.device-bin/fixpy
rm -rf "$dest"; mkdir -p "$dest/wheel" "$dest/baseline" "$dest/pywheels"
cp "$root"/target/wheels-fixpy/ferrocuda_torch-*.whl "$dest/wheel/"
# The baseline: session 18's wheel (glue.rs, op.rs, dlpack.rs' import as before this fix).
cp /work/main/.device-bin/py18/wheel/*.whl "$dest/baseline/"
cp /work/main/.device-bin/py18/pywheels/*.whl "$dest/pywheels/"
cp -r "$root/python/ferrocuda-torch/tests" "$dest/tests"
cp "$root/audit/2026-11-28h/g20r2-torch-side-stream/repro.py" "$dest/g20r2.py"
cp "$root/audit/2026-11-28h/g20r3-dlpack-repoint/repro.py" "$dest/g20r3.py"
cp "$root/bench/results/s20-fixpy/bench_overhead.py" "$root/bench/results/s20-fixpy/job.sh" "$dest/"
du -sh "$dest"
