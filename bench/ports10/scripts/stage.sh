#!/usr/bin/env bash
# Stages bench/ports10's GPU job into DEST (default /work/main/.device-bin/port): the bench and
# test binaries (xz), the twins' source and gpu-job.sh (as job.sh). Build first:
#   cargo build --release -p ferrocuda-ports10 --bins && cargo test --release -p ferrocuda-ports10 --test ports10 --no-run
# Then, on the GPU machine: bash .device-bin/port/job.sh (reports under $OUT/port/).
set -eu
root="$(cd "$(dirname "$0")/../../.." && pwd)"
dest="${1:-/work/main/.device-bin/port}"
mkdir -p "$dest"
rm -f "$dest"/ports10_* "$dest"/*.xz "$dest"/gpu-job.sh "$dest"/job.sh
tests="$(ls -t "$root"/target/release/deps/ports10-* | grep -v '\.d$' | head -1)"
cp "$root/target/release/ports10_bench" "$dest/ports10_bench"
cp "$tests" "$dest/ports10_tests"
xz -6 -T2 -f "$dest/ports10_bench" "$dest/ports10_tests"
cp "$root/bench/ports10/cuda/ports10.cu" "$dest/"
# The job under the name the session's brief gives it (`bash .device-bin/port/job.sh`).
cp "$root/bench/ports10/scripts/gpu-job.sh" "$dest/job.sh"
du -sh "$dest"
