#!/usr/bin/env bash
# Runs the benchmarks on a machine with an NVIDIA GPU and the CUDA toolkit (nvcc, NVRTC,
# cuBLAS, cuobjdump), writing the table, the JSON and both implementations' SASS to OUT_DIR.
#
#   cargo build --release -p ferrocuda-bench        # on any machine (no CUDA toolkit needed)
#   bench/run-on-gpu.sh [BENCH_BINARY] [OUT_DIR] [BENCH_OPTIONS..]   # on the GPU machine
#
# BENCH_BINARY defaults to ./ferrocuda-bench beside this script (a copied-over build), else
# target/release/ferrocuda-bench; OUT_DIR to target/bench-results.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
default_bin=$here/ferrocuda-bench
[ -x "$default_bin" ] || default_bin=$here/../target/release/ferrocuda-bench
bin=${1:-$default_bin}
out=${2:-$here/../target/bench-results}
cuda=${CUDA_HOME:-/usr/local/cuda}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# NVRTC and cuBLAS are opened at run time; the toolkit's libraries are not on the default path.
export LD_LIBRARY_PATH=$cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# Measure the JIT itself, not the driver's on-disk cache of earlier JIT results.
export CUDA_CACHE_DISABLE=1

nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,memory.total --format=csv | tee "$out/gpu.txt"

# The runtime API's <<<>>> launch overhead, measured by a small nvcc-built program.
runtime=()
if "$cuda/bin/nvcc" -O3 -arch=native -o "$work/launch_overhead" "$here/cuda/launch_overhead.cu" &&
    "$work/launch_overhead" | tee "$work/launch_runtime.json"; then
    runtime=(--runtime-launch-overhead "$work/launch_runtime.json")
fi

# Keep going after a failed case: the SASS below is what explains it.
status=0
"$bin" --json "$out/results.json" "${runtime[@]}" --dump-cubins "$work" "${@:3}" | tee "$out/table.txt" || status=$?

# SASS of both implementations, for the comparisons in BENCHMARKS.md.
for impl in rust cuda; do
    if [ -f "$work/$impl.cubin" ]; then
        "$cuda/bin/cuobjdump" -sass "$work/$impl.cubin" > "$out/sass_$impl.txt"
        "$cuda/bin/cuobjdump" -res-usage "$work/$impl.cubin" > "$out/resources_$impl.txt" 2>&1 || true
    fi
done
exit "$status"
