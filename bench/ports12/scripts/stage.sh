#!/usr/bin/env bash
# Stages bench/ports12's GPU job into DEST (default /work/main/.device-bin/port): the bench and
# test binaries (xz), the twins' source and gpu-job.sh (as job.sh). Build first:
#   cargo build --release -p ferrocuda-ports12 --bins && cargo test --release -p ferrocuda-ports12 --test ports12 --no-run
# Then, on the GPU machine: bash .device-bin/port/job.sh (reports under $OUT/port/).
set -eu
root="$(cd "$(dirname "$0")/../../.." && pwd)"
dest="${1:-/work/main/.device-bin/port}"
mkdir -p "$dest"
rm -f "$dest"/ports12_* "$dest"/*.xz "$dest"/gpu-job.sh "$dest"/job.sh "$dest"/ports12.cu
tests="$(ls -t "$root"/target/release/deps/ports12-* | grep -v '\.d$' | head -1)"
cp "$root/target/release/ports12_bench" "$dest/ports12_bench"
cp "$tests" "$dest/ports12_tests"
xz -6 -T2 -f "$dest/ports12_bench" "$dest/ports12_tests"
cp "$root/bench/ports12/cuda/ports12.cu" "$dest/"
# The job under the name the session's brief gives it (`bash .device-bin/port/job.sh`).
cp "$root/bench/ports12/scripts/gpu-job.sh" "$dest/job.sh"
du -sh "$dest"
