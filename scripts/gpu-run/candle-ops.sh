#!/usr/bin/env bash
# candle's CUDA backend and ferrocuda in one binary, on a GPU (docs/interop.md, section 3):
# interop/candle-ops' example (ferrocuda's RMSNorm and attention as candle CustomOps vs candle's
# own ops, results and times), built here against stub CUDA libraries, run there on the real ones.
#   scripts/gpu-run/candle-ops.sh stage <dir>   (here, after scripts/check-candle-ops.sh
#                                                --features cuda: copies the binaries, xz'd)
#   scripts/gpu-run/candle-ops.sh run <dir>     (there: REQUIRE_GPU=1, log in $OUT/candle-ops.txt)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
mode=${1:?usage: candle-ops.sh stage|run <dir>}
dir=${2:?usage: candle-ops.sh stage|run <dir>}
target=${CARGO_TARGET_DIR:-$root/target}

if [ "$mode" = stage ]; then
  set -e
  rm -rf "$dir" && mkdir -p "$dir"
  cp "$target/release/examples/candle_ops_gpu" "$dir/"
  # The link check built with candle's CUDA backend too, when built (`--features candle-cuda`).
  if [ -n "${WITH_LINK_CHECK:-}" ]; then cp "$target/release/ferrocuda-candle-link-check" "$dir/"; fi
  xz -T1 -6 "$dir"/*
  cp "$0" "$dir/candle-ops.sh"
  git -C "$root" rev-parse HEAD > "$dir/commit.txt"
  echo "staged in $dir: $(ls "$dir" | tr '\n' ' ') ($(du -sh "$dir" | cut -f1))"
  exit 0
fi

dir=$(cd "$dir" && pwd)
log="${OUT:-.}/candle-ops.txt"
{
  echo "== $(date -u +%FT%TZ) commit $(cat "$dir/commit.txt" 2>/dev/null)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  work=$(mktemp -d)
  for f in "$dir"/*.xz; do xz -dc "$f" > "$work/$(basename "$f" .xz)"; chmod +x "$work/$(basename "$f" .xz)"; done
  # Where this machine keeps the CUDA libraries the binary links (libcudart, libcublas(Lt),
  # libcurand, libnvrtc: the toolkit's lib64; libcuda: the driver's, on the loader's path).
  echo "-- CUDA libraries:"
  ls /usr/local/cuda/lib64/ 2>/dev/null | grep -E '^lib(cudart|cublas|cublasLt|curand|nvrtc|cufft)\.so\.[0-9]+$' | tr '\n' ' '; echo
  ldconfig -p | grep -E 'libcuda\.so\.1|libcublas\.so' | head -4
  export LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "-- ldd candle_ops_gpu (CUDA):"
  ldd "$work/candle_ops_gpu" | grep -E 'cuda|cublas|curand|nvrtc|cufft|not found'
  echo "-- REQUIRE_GPU=1 candle_ops_gpu"
  REQUIRE_GPU=1 timeout 150 "$work/candle_ops_gpu"; echo "candle_ops_gpu rc=$?"
  if [ -x "$work/ferrocuda-candle-link-check" ]; then
    echo "-- ferrocuda-candle-link-check (--features candle-cuda)"
    timeout 30 "$work/ferrocuda-candle-link-check"; echo "ferrocuda-candle-link-check rc=$?"
  fi
} 2>&1 | tee "$log"
