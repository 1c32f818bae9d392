#!/usr/bin/env bash
# nvcc for candle-kernels' build that takes objects compiled elsewhere
# (scripts/candle-kernels-prebuild.sh): cudaforge, candle's kernel builder, runs `$NVCC`. For
# `nvcc -gencode=arch=compute_A,code=sm_A -c -o OBJ ... SRC` where $NVCC_PREBUILT_DIR holds
# SRC's object compiled for the same arch A from a source with the same sha256, it copies that
# object to OBJ; everything else (the PTX, the `--lib` archive, other sources or archs, a
# changed source) goes to the real nvcc, $NVCC_REAL.
#
#   NVCC=scripts/nvcc-prebuilt.sh NVCC_REAL=/path/to/nvcc NVCC_PREBUILT_DIR=/path/to/objs cargo build ...
set -euo pipefail
real=${NVCC_REAL:?NVCC_REAL names the real nvcc}
dir=${NVCC_PREBUILT_DIR:-}
args=("$@")
obj="" arch="" compile=false
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    -c) compile=true ;;
    -o) obj=${args[i + 1]:-} ;;
    -gencode=arch=compute_*) arch=${args[i]#-gencode=arch=compute_}; arch=${arch%%,*} ;;
  esac
done
src=${args[${#args[@]} - 1]:-}
if $compile && [ -n "$dir" ] && [ -n "$obj" ] && [[ "$src" == *.cu ]] && [ "$(cat "$dir/ARCH" 2>/dev/null)" = "$arch" ]; then
  prebuilt="$dir/$(basename "$src" .cu).o"
  want=$(awk -v f="$src" '$2 == f {print $1}' "$dir/SOURCES.sha256")
  if [ -f "$prebuilt" ] && [ -n "$want" ] && [ "$(sha256sum "$src" | cut -d' ' -f1)" = "$want" ]; then
    cp "$prebuilt" "$obj"
    echo "nvcc-prebuilt: $src -> $obj from $prebuilt (sm_$arch)" >&2
    exit 0
  fi
fi
exec "$real" "$@"
