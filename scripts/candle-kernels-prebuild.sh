#!/usr/bin/env bash
# candle-kernels 0.11.1's precompiled objects (the quantized-matmul and MoE kernels its build.rs
# hands to cudaforge's `build_lib`), compiled in parallel on a machine with many cores and nvcc
# 13.0 (a GPU machine), with exactly the arguments cudaforge 0.1.6 gives nvcc; the two-core
# build machine then takes them through scripts/nvcc-prebuilt.sh instead of compiling them
# (docs/interop.md, section 3).
#
#   scripts/candle-kernels-prebuild.sh SRC_TAR OUT_DIR [ARCH]
#
# SRC_TAR: candle-kernels' Cargo.toml, build.rs and src/ (tar.xz, from the cargo registry);
# ARCH: what CUDA_COMPUTE_CAP=90 makes of it, 90a. Writes OUT_DIR/candle-kernels-objs-sm_ARCH.tar.xz
# (objs/*.o, objs/SOURCES.sha256, objs/ARCH) and prints each file's compile time.
set -euo pipefail
src_tar=$1 out=$2 arch=${3:-90a}
work=$(mktemp -d)
tar -xJf "$src_tar" -C "$work"
cd "$work"
mkdir objs
echo "nvcc: $(command -v nvcc) $(nvcc --version | grep -o 'release [0-9.]*, V[0-9.]*'); host compiler: $(c++ --version | head -1); $(nproc) cores"
# The list and the flags of candle-kernels 0.11.1's build.rs (without its `cutile` feature) and
# of cudaforge's build_lib: -gencode, -c -o, --default-stream per-thread, the builder's args,
# then -Xcompiler -fPIC (cudaforge adds it again for non-MSVC targets).
files=(src/moe/moe_gguf.cu src/moe/moe_wmma.cu src/moe/moe_wmma_gguf.cu src/mmvq_gguf.cu
       src/mmq_gguf/mmq_quantize.cu src/mmq_gguf/mmq_instance_q4_0.cu src/mmq_gguf/mmq_instance_q4_1.cu
       src/mmq_gguf/mmq_instance_q5_0.cu src/mmq_gguf/mmq_instance_q5_1.cu src/mmq_gguf/mmq_instance_q8_0.cu
       src/mmq_gguf/mmq_instance_q2_k.cu src/mmq_gguf/mmq_instance_q3_k.cu src/mmq_gguf/mmq_instance_q4_k.cu
       src/mmq_gguf/mmq_instance_q5_k.cu src/mmq_gguf/mmq_instance_q6_k.cu)
compile() {
  local src=$1 start=$SECONDS
  nvcc "-gencode=arch=compute_$arch,code=sm_$arch" -c -o "objs/$(basename "$src" .cu).o" --default-stream per-thread \
    --expt-relaxed-constexpr -std=c++17 -O3 -Xcompiler -fPIC -Xcompiler -fPIC "$src"
  echo "  $src: $((SECONDS - start)) s"
}
export -f compile
export arch
start=$SECONDS
printf '%s\n' "${files[@]}" | xargs -P "$(nproc)" -I{} bash -c 'compile {}'
echo "all ${#files[@]} objects in $((SECONDS - start)) s (wall, $(nproc) in parallel)"
sha256sum "${files[@]}" > objs/SOURCES.sha256
echo "$arch" > objs/ARCH
tar -cJf "$out/candle-kernels-objs-sm_$arch.tar.xz" objs
ls -la "$out"
