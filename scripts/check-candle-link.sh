#!/usr/bin/env bash
# ferrocuda and candle's CUDA stack in one binary (docs/interop.md, section 3). candle-core 0.11
# asks cudarc 0.19 for `dynamic-linking`; ferrocuda asks for `fallback-dynamic-loading`, which
# gives way to it. This builds interop/candle-link-check (ferrocuda-host + cudarc with exactly
# candle-core's features; its own workspace, outside the main one) into one binary, linked
# against stub CUDA libraries generated here from cudarc's own declarations (no CUDA install
# needed), checks that the binary names the CUDA libraries it was linked with, and runs it on
# the stubs: ferrocuda's probe finds the linked driver, and cuInit through ferrocuda and
# through cudarc return the same code (the stubs answer CUDA_ERROR_STUB_LIBRARY, 34).
#
#   scripts/check-candle-link.sh                 # ferrocuda-host + cudarc (CI runs this)
#   scripts/check-candle-link.sh --features candle
#                                                # + candle-core 0.11.1 (feature `cudarc`: cudarc
#                                                #   as candle links it, no candle kernels)
#   CUDA_LINK_DIR=/usr/local/cuda/lib64 scripts/check-candle-link.sh --features candle-cuda
#                                                # candle's CUDA backend: needs nvcc (see the doc)
#                                                #   and links the real libraries; run on a GPU
#   CUDART_SO=DIR/nvidia/cu13/lib/libcudart.so.13 scripts/check-candle-link.sh --features candle-cuda
#                                                # the same against the stubs, with nvcc set up as
#                                                #   scripts/check-candle-ops.sh does (docs/interop.md)
#
# CUDA_LINK_DIR: link against the real libraries there instead of the stubs (then the binary is
# run as it is, and on a GPU machine it also borrows a cudarc context, stream and slice).
# CARGO_TARGET_DIR defaults to this checkout's target/, so ferrocuda's crates built there are
# reused where their features match.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
crate="$root/interop/candle-link-check"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
started=$(date +%s)

# The workspace's lock file: the same dependency versions as the main build (cargo adds what
# only this crate needs). Not committed: it would drift from the main one.
cp "$root/Cargo.lock" "$crate/Cargo.lock"
cargo fetch --manifest-path "$crate/Cargo.toml" --quiet

if [ -n "${CUDA_LINK_DIR:-}" ]; then
  link_dir="$CUDA_LINK_DIR"
  run_env=()
else
  # Stub libraries generated from cudarc's own declarations (scripts/cuda-link-stubs.sh says
  # what they are).
  cudarc=$(cargo metadata --manifest-path "$crate/Cargo.toml" --format-version 1 |
    python3 -c 'import json,sys; print(next(p["manifest_path"] for p in json.load(sys.stdin)["packages"] if p["name"]=="cudarc").rsplit("/",1)[0])')
  link_dir="$CARGO_TARGET_DIR/cuda-link-stubs"
  "$root/scripts/cuda-link-stubs.sh" "$cudarc" "$link_dir" "${CUDART_SO:-}"
  run_env=(env "LD_LIBRARY_PATH=$link_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
fi

echo "check-candle-link: building $crate $* (link dir $link_dir, target dir $CARGO_TARGET_DIR)"
FERROCUDA_CUDA_LINK_DIR="$link_dir" cargo build --release --manifest-path "$crate/Cargo.toml" "$@"
binary="$CARGO_TARGET_DIR/release/ferrocuda-candle-link-check"

# Linked, not loaded: the binary names the CUDA libraries (ferrocuda's own binaries do not).
needed=$(readelf -d "$binary" | sed -nE 's/.*\(NEEDED\).*\[(.*)\]/\1/p' | tr '\n' ' ')
echo "check-candle-link: NEEDED $needed"
for lib in libcuda.so.1 libcublas.so libcublasLt.so libcufft.so; do
  case " $needed" in *" $lib"*) ;; *) echo "check-candle-link: $binary does not link $lib: cudarc was not in dynamic-linking mode" >&2; exit 1 ;; esac
done

"${run_env[@]}" "$binary"

# The other side: with nobody asking to link, ferrocuda's own binaries open CUDA at run time
# and start without it (when this target dir has the main job from `cargo test`/`cargo build`).
main_job="$CARGO_TARGET_DIR/release/ferrocuda"
if [ -x "$main_job" ]; then
  if readelf -d "$main_job" | grep -E 'NEEDED.*lib(cuda|cublas|cublasLt|cufft|nvrtc)\.so'; then
    echo "check-candle-link: $main_job links CUDA libraries: ferrocuda's own builds must load them at run time" >&2
    exit 1
  fi
  echo "check-candle-link: $main_job links no CUDA library (loads them at run time)"
fi
echo "check-candle-link: passed in $(( $(date +%s) - started )) s"
