#!/usr/bin/env bash
# Stub CUDA libraries to link a binary that links CUDA (cudarc's `dynamic-linking`, as
# candle-core asks for) on a machine without CUDA: every function cudarc declares for the
# library, under the library's real soname (so the binary records the names a CUDA 13 machine
# has, and runs unchanged on a GPU machine's real libraries), returning an error code that is
# a valid value of the library's status enum: CUDA_ERROR_STUB_LIBRARY (34) for the driver,
# NOT_INITIALIZED / INVALID_PLAN / OUT_OF_MEMORY (1) for cuBLAS(Lt), cuFFT and NVRTC,
# VERSION_MISMATCH (100) for cuRAND. Only for linking and for calls that return a status.
#
#   scripts/cuda-link-stubs.sh CUDARC_SRC_DIR OUT_DIR [CUDART_SO]
#
# CUDARC_SRC_DIR: cudarc's source (the `cudarc` package's folder in the cargo registry).
# CUDART_SO: a real libcudart.so.13 (PyPI's nvidia-cuda-runtime has one), linked as
# `libcudart.so` for crates that name it (candle-kernels' nvcc objects): the CUDA runtime's
# registration calls that nvcc's host code makes are not in cudarc's declarations, and it
# loads without a driver.
set -euo pipefail
cudarc=$1 link_dir=$2 cudart=${3:-}
rm -rf "$link_dir" && mkdir -p "$link_dir"
# module in cudarc/src, library name, soname (CUDA 13.0), error code
for spec in driver:cuda:libcuda.so.1:34 cublas:cublas:libcublas.so.13:1 cublaslt:cublasLt:libcublasLt.so.13:1 \
            curand:curand:libcurand.so.10:100 nvrtc:nvrtc:libnvrtc.so.13:1 cufft:cufft:libcufft.so.12:1; do
  IFS=: read -r module name soname code <<<"$spec"
  sed -nE "s/^\\s*fn (\\w+)\\(.*;\$/int \\1(void) { return $code; }/p" "$cudarc/src/$module/sys/mod.rs" | sort -u >"$link_dir/$name.c"
  [ -s "$link_dir/$name.c" ] || { echo "cuda-link-stubs: no declarations found in $cudarc/src/$module/sys/mod.rs" >&2; exit 1; }
  cc -shared -fPIC -o "$link_dir/lib$name.so" -Wl,-soname,"$soname" "$link_dir/$name.c"
  ln -sf "lib$name.so" "$link_dir/$soname"
done
if [ -n "$cudart" ]; then
  ln -sf "$cudart" "$link_dir/libcudart.so"
  ln -sf "$cudart" "$link_dir/libcudart.so.13"
fi
