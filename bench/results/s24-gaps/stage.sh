#!/usr/bin/env bash
# Stages session 24's gaps job into DEST (default /work/main/.device-bin/gaps): this branch's
# bench/ports11 bench and test binaries (xz), main's bench binary as built in /work/main (the
# side-by-side), the twins' source and job.sh. Build first, in this worktree:
#   cargo build --release -p ferrocuda-ports11 --bins && cargo test --release -p ferrocuda-ports11 --test ports11 --no-run
# Then, on the GPU machine: bash .device-bin/gaps/job.sh (reports under $OUT/gaps/).
set -eu
root="$(cd "$(dirname "$0")/../../.." && pwd)"
dest="${1:-/work/main/.device-bin/gaps}"
mkdir -p "$dest"
rm -f "$dest"/READY "$dest"/*.xz "$dest"/ports11_* "$dest"/job.sh "$dest"/ports11.cu "$dest"/nvcc-s23.cu
tests="$(ls -t "$root"/target/release/deps/ports11-* | grep -v '\.d$' | head -1)"
cp "$root/target/release/ports11_bench" "$dest/ports11_bench"
cp "$tests" "$dest/ports11_tests"
if [ -x /work/main/target/release/ports11_bench ]; then cp /work/main/target/release/ports11_bench "$dest/ports11_bench_main"; fi
xz -6 -T2 -f "$dest"/ports11_bench* "$dest/ports11_tests"
cp "$root/bench/ports11/cuda/ports11.cu" "$root/bench/results/s23-gaps/nvcc-s23.cu" "$dest/"
cp "$root/bench/results/s24-gaps/job.sh" "$dest/job.sh"
du -sh "$dest"
