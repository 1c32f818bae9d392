#!/usr/bin/env bash
# The GPU run of ferrocuda_torch's ops (issue 32), for a GPU machine without cargo:
#   scripts/gpu-run/torch-ops.sh stage <dir>   (here: builds the two wheels with
#                                              scripts/check-python.sh, copies them and pytest)
#   scripts/gpu-run/torch-ops.sh run <dir>     (there, from the repository root: everything with
#                                              REQUIRE_GPU=1; log in $OUT/torch-ops.txt)
# Runs: python/ferrocuda-torch/tests (test_torch.py, test_ops_registration.py, test_ops.py,
# test_numpy.py where NumPy is), templates/torch-op/tests, then the attention benchmark beside
# F.scaled_dot_product_attention (forward, backward, forward+backward, ratios; BENCH=full for
# every row op too, BENCH=none for none) and the host-side overhead benchmark
# (bench/overhead_cpu.py, the CPU figures of this machine). Needs PyTorch in $TORCH_PYTHON
# (default /opt/torch/.venv/bin/python). About 3 minutes (tests ~2, attention benchmark ~40 s).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
mode=${1:?usage: torch-ops.sh stage|run <dir>}
dir=${2:?usage: torch-ops.sh stage|run <dir>}

if [ "$mode" = stage ]; then
  set -e
  mkdir -p "$dir/pywheels"
  cd "$root"
  ./scripts/check-python.sh
  target=${CARGO_TARGET_DIR:-$root/target}
  cp "$target"/wheels/ferrocuda_torch-*.whl "$target"/wheels/my_torch_op-*.whl "$dir/pywheels/"
  python3 -m pip download --quiet --no-deps -d "$dir/pywheels" pytest pluggy iniconfig packaging pygments
  git rev-parse HEAD > "$dir/commit.txt"
  echo "staged in $dir: $(ls "$dir/pywheels" | tr '\n' ' ')"
  exit 0
fi

dir=$(cd "$dir" && pwd)
out=${OUT:-$dir/out}
mkdir -p "$out"
export REQUIRE_GPU=1 PYTHONDONTWRITEBYTECODE=1
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
  rm -rf "$dir/pylib" && mkdir -p "$dir/pylib"
  for w in "$dir"/pywheels/*.whl; do "$python" -m zipfile -e "$w" "$dir/pylib"; done
  export PYTHONPATH="$dir/pylib"
  echo "python: $("$python" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)')"
  cd "$root/python/ferrocuda-torch"
  tests="tests/test_torch.py tests/test_ops_registration.py tests/test_ops.py"
  if "$python" -c 'import numpy' 2>/dev/null; then tests="$tests tests/test_numpy.py"; fi
  # shellcheck disable=SC2086
  step pytest_ferrocuda_torch 300 "$python" -m pytest -q -rs -p no:cacheprovider $tests
  step pytest_template 120 "$python" -m pytest -q -rs -p no:cacheprovider "$root/templates/torch-op/tests"
  case "${BENCH:-attention}" in
    none) ;;
    full) step bench_ops 600 "$python" bench/bench_ops.py ;;
    *) step bench_attention 240 "$python" bench/bench_ops.py --attention-only ;;
  esac
  step overhead_cpu 120 "$python" bench/overhead_cpu.py
  echo "overall: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
  [ $status -eq 0 ]
} 2>&1 | tee "$out/torch-ops.txt"
exit "${PIPESTATUS[0]}"
