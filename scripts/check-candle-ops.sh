#!/usr/bin/env bash
# ferrocuda's kernels as candle ops (interop/candle-ops; docs/interop.md, section 3).
#
#   scripts/check-candle-ops.sh                 # CPU: the ops on candle's CPU tensors (ferrocuda's
#                                               #   CPU executor) vs candle's own ops, refusals
#   scripts/check-candle-ops.sh --features cuda # + candle's CUDA backend in the same binary:
#                                               #   builds candle-kernels with nvcc, links the
#                                               #   example against stub CUDA libraries, runs it
#                                               #   on the stubs (it reports no GPU and exits 0),
#                                               #   and runs the CPU tests in that build
#
# For `--features cuda`: nvcc 13.0 (PyPI's wheels serve; docs/interop.md lists the exact
# versions): CUDA_PIP_DIR=DIR, the folder `pip install --target DIR ...` made, or nvcc on PATH
# with CUDA_ROOT set. CUDA_COMPUTE_CAP (default 90, which candle's builder makes sm_90a) is the
# GPU candle-kernels' precompiled (quantized, MoE) objects are for; its PTX kernels load on any
# GPU from it up. CANDLE_KERNELS_PREBUILT=DIR: take those objects from DIR (made elsewhere by
# scripts/candle-kernels-prebuild.sh) instead of compiling them here. The built binary,
# target/release/examples/candle_ops_gpu, runs unchanged on a GPU machine's real libraries
# (REQUIRE_GPU=1 there).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
crate="$root/interop/candle-ops"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
started=$(date +%s)
cp "$root/Cargo.lock" "$crate/Cargo.lock"

cuda=false
for arg in "$@"; do case "$arg" in *cuda*) cuda=true ;; esac; done

if ! $cuda; then
  cargo test --release --manifest-path "$crate/Cargo.toml" "$@"
  echo "check-candle-ops: CPU tests passed in $(( $(date +%s) - started )) s"
  exit 0
fi

if [ -n "${CUDA_PIP_DIR:-}" ]; then
  cu="$CUDA_PIP_DIR/nvidia/cu13"
  # Idempotent: a changed PATH makes cudarc's build script, and all that depends on it, run again.
  case ":$PATH:" in *":$cu/bin:"*) ;; *) export PATH="$cu/bin:$PATH" ;; esac
  case " ${NVCC_PREPEND_FLAGS:-} " in *" -I$cu/include/cccl "*) ;; *) export NVCC_PREPEND_FLAGS="-I$cu/include/cccl${NVCC_PREPEND_FLAGS:+ $NVCC_PREPEND_FLAGS}" ;; esac
  export CUDA_ROOT="$cu" CUDA_HOME="$cu" NVCC="$cu/bin/nvcc"
  cudart="$cu/lib/libcudart.so.13"
else
  cudart="${CUDART_SO:-}"
fi
command -v nvcc >/dev/null || { echo "check-candle-ops: no nvcc; set CUDA_PIP_DIR (docs/interop.md, section 3)" >&2; exit 1; }
# candle-kernels' quantized and MoE objects compiled elsewhere (scripts/candle-kernels-prebuild.sh
# on a machine with many cores): candle's builder takes them through scripts/nvcc-prebuilt.sh.
if [ -n "${CANDLE_KERNELS_PREBUILT:-}" ]; then
  export NVCC_REAL="$(command -v nvcc)" NVCC_PREBUILT_DIR="$CANDLE_KERNELS_PREBUILT" NVCC="$root/scripts/nvcc-prebuilt.sh"
fi
export CUDA_COMPUTE_CAP="${CUDA_COMPUTE_CAP:-90}"

cargo fetch --manifest-path "$crate/Cargo.toml" --quiet
cudarc=$(cargo metadata --manifest-path "$crate/Cargo.toml" --format-version 1 |
  python3 -c 'import json,sys; print(next(p["manifest_path"] for p in json.load(sys.stdin)["packages"] if p["name"]=="cudarc").rsplit("/",1)[0])')
link_dir="$CARGO_TARGET_DIR/cuda-link-stubs"
"$root/scripts/cuda-link-stubs.sh" "$cudarc" "$link_dir" "$cudart"

echo "check-candle-ops: building $crate $* (sm $CUDA_COMPUTE_CAP, link dir $link_dir)"
FERROCUDA_CUDA_LINK_DIR="$link_dir" cargo build --release --manifest-path "$crate/Cargo.toml" --example candle_ops_gpu "$@"
binary="$CARGO_TARGET_DIR/release/examples/candle_ops_gpu"
needed=$(readelf -d "$binary" | sed -nE 's/.*\(NEEDED\).*\[(.*)\]/\1/p' | tr '\n' ' ')
echo "check-candle-ops: NEEDED $needed"
for lib in libcuda.so.1 libcublas.so.13 libcudart.so.13; do
  case " $needed" in *" $lib"*) ;; *) echo "check-candle-ops: $binary does not link $lib" >&2; exit 1 ;; esac
done
# On the stubs candle finds no GPU: the example says so and exits 0 (it starts, all linked);
# the CPU tests run in this build too (the same crates, so nothing is compiled twice).
export LD_LIBRARY_PATH="$link_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
"$binary"
FERROCUDA_CUDA_LINK_DIR="$link_dir" cargo test --release --manifest-path "$crate/Cargo.toml" "$@"
echo "check-candle-ops: passed in $(( $(date +%s) - started )) s"
