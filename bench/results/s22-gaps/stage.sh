#!/bin/bash
# How the s22 gaps job's binaries were built (build machine, this branch; one package at a
# time): the kernel library's bench_rows with the builder's default flags and with
# runtime_unroll(4) in kernels/device's build.rs, and ports9_bench with runtime_unroll(4) in both
# ports9 kernel crates (its "base" is session 21's figures: the build machine's time ran out).
# Then xz -6 each binary into /work/main/.device-bin/gaps/ with job.sh, compare.py, the twin
# cubins (nvcc 13.0.88: rows_twins.cu -O3 -arch=sm_90; ports9.cu with gpu-job.sh's three flag
# sets) and bench/results/s21-gaps2/gpu-h200/bench1.txt as ports9-s21-bench1.txt.
set -ex
cd "$(dirname "$0")/../../.."
S=${S:-/tmp/s22/stage}
cargo build --release -p ferrocuda-kernels --example bench_rows
cp target/release/examples/bench_rows $S/bench_rows.base
cp kernels/device/build.rs /tmp/kdev-build.rs.orig
sed -i 's/\.launch_block_threads(256)/.launch_block_threads(256)\n        .runtime_unroll(4)/' kernels/device/build.rs
cargo build --release -p ferrocuda-kernels --example bench_rows
cp target/release/examples/bench_rows $S/bench_rows.ru4
cp /tmp/kdev-build.rs.orig kernels/device/build.rs
cp bench/ports9/llmc/build.rs /tmp/p9l.orig; cp bench/ports9/vllm/build.rs /tmp/p9v.orig
sed -i 's/\.run();/.runtime_unroll(4).run();/' bench/ports9/llmc/build.rs bench/ports9/vllm/build.rs
cargo build --release -p ferrocuda-ports9 --bin ports9_bench
cp target/release/ports9_bench $S/ports9_bench.ru4
cp /tmp/p9l.orig bench/ports9/llmc/build.rs; cp /tmp/p9v.orig bench/ports9/vllm/build.rs
