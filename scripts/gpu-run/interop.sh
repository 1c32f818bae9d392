#!/usr/bin/env bash
# The GPU checks of docs/interop.md, for a GPU machine without cargo (scripts/gpu-run/stage.sh
# covers the rest of the workspace).
#   scripts/gpu-run/interop.sh stage <dir>   (here: builds and copies what the run needs)
#   scripts/gpu-run/interop.sh run <dir>     (there, from the repository root: runs it all
#                                             with REQUIRE_GPU=1, log in $OUT/interop.txt)
# The run needs PyTorch in $TORCH_PYTHON (default /opt/torch/.venv/bin/python); pytest comes
# staged. CANDLE_REDUCE_PTX at staging time names candle-kernels' reduce.ptx (see
# docs/interop.md, "candle"); without it the candle example compares with a host reference.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
mode=${1:?usage: interop.sh stage|run <dir>}
dir=${2:?usage: interop.sh stage|run <dir>}

if [ "$mode" = stage ]; then
  set -e
  mkdir -p "$dir/pywheels"
  cd "$root"
  test_bin=$(cargo test --release --test gpu_borrowed --no-run --message-format=json 2>/dev/null |
    scripts/gpu-run/cargo-executable.py gpu_borrowed)
  cp "$test_bin" "$dir/gpu_borrowed"
  cargo build --release --example launch_overhead --example candle_rms_norm
  cp target/release/examples/launch_overhead target/release/examples/candle_rms_norm "$dir/"
  ./scripts/check-python.sh
  cp target/wheels/ferrocuda_torch-*.whl "$dir/pywheels/"
  python3 -m pip download --quiet --no-deps -d "$dir/pywheels" pytest pluggy iniconfig packaging pygments
  if [ -n "${CANDLE_REDUCE_PTX:-}" ]; then cp "$CANDLE_REDUCE_PTX" "$dir/reduce.ptx"; fi
  # ferrocuda with cudarc linked as candle-core asks (built against stubs; there it runs on the
  # machine's real libraries).
  ./scripts/check-candle-link.sh
  cp "${CARGO_TARGET_DIR:-target}/release/ferrocuda-candle-link-check" "$dir/"
  git rev-parse HEAD > "$dir/commit.txt"
  echo "staged in $dir: $(ls "$dir" | tr '\n' ' ')"
  exit 0
fi

dir=$(cd "$dir" && pwd)
out=${OUT:-$dir/out}
mkdir -p "$out"
export REQUIRE_GPU=1
python=${TORCH_PYTHON:-/opt/torch/.venv/bin/python}
status=0
step() { # step <name> <seconds> <command...>
  local name=$1 limit=$2; shift 2
  echo "=== $name ($(date -u +%H:%M:%S))"
  timeout "$limit" "$@" 2>&1
  local rc=$?
  echo "=== $name: exit $rc"
  [ $rc -eq 0 ] || status=1
}
{
  echo "commit $(cat "$dir/commit.txt" 2>/dev/null)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  step gpu_borrowed 150 "$dir/gpu_borrowed" --test-threads=1 --nocapture
  if [ -f "$dir/reduce.ptx" ]; then export CANDLE_REDUCE_PTX="$dir/reduce.ptx"; fi
  step candle_rms_norm 90 "$dir/candle_rms_norm"
  mkdir -p "$dir/pylib"
  for w in "$dir"/pywheels/*.whl; do python3 -m zipfile -e "$w" "$dir/pylib" 2>/dev/null || "$python" -m zipfile -e "$w" "$dir/pylib"; done
  echo "python: $("$python" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)')"
  cd "$root/python/ferrocuda-torch"
  step pytest_torch 150 env PYTHONPATH="$dir/pylib" PYTHONDONTWRITEBYTECODE=1 "$python" -m pytest -v -p no:cacheprovider tests/test_torch.py
  # The library's ops (torch.library): results, gradients, opcheck, torch.compile, graph capture.
  step pytest_ops 200 env PYTHONPATH="$dir/pylib" PYTHONDONTWRITEBYTECODE=1 "$python" -m pytest -q -rs -p no:cacheprovider tests/test_ops.py
  if "$python" -c 'import numpy' 2>/dev/null; then
    step pytest_numpy 60 env PYTHONPATH="$dir/pylib" PYTHONDONTWRITEBYTECODE=1 "$python" -m pytest -q -p no:cacheprovider tests/test_numpy.py
  fi
  step launch_overhead 150 "$dir/launch_overhead"
  if [ -x "$dir/ferrocuda-candle-link-check" ]; then
    # Linked, it needs libcublas.so.13, libcublasLt.so.13 and libcufft.so.12 to start: the
    # driver's libcuda is on the loader's path, the others come with torch's nvidia packages.
    libdirs=$("$python" -c 'import glob, os, sys; print(":".join(sorted({os.path.dirname(p) for p in glob.glob(sys.prefix + "/lib/python3*/site-packages/nvidia/**/lib*.so*", recursive=True)})))')
    step candle_link_check 60 env LD_LIBRARY_PATH="$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$dir/ferrocuda-candle-link-check"
  fi
  echo "overall: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
  [ $status -eq 0 ]
} 2>&1 | tee "$out/interop.txt"
exit "${PIPESTATUS[0]}"
