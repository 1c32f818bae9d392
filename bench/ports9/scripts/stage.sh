#!/usr/bin/env bash
# Stages bench/ports9's GPU job into DEST (default /work/main/.device-bin/port): the bench and
# test binaries (xz), the twins' source and gpu-job.sh. Build first:
#   cargo build --release -p ferrocuda-ports9 --bins && cargo test --release -p ferrocuda-ports9 --test ports9 --no-run
set -eu
root="$(cd "$(dirname "$0")/../../.." && pwd)"
dest="${1:-/work/main/.device-bin/port}"
mkdir -p "$dest"
rm -f "$dest"/ports9_* "$dest"/*.xz
tests="$(ls -t "$root"/target/release/deps/ports9-* | grep -v '\.d$' | head -1)"
cp "$root/target/release/ports9_bench" "$dest/ports9_bench"
cp "$tests" "$dest/ports9_tests"
xz -6 -T2 -f "$dest/ports9_bench" "$dest/ports9_tests"
cp "$root/bench/ports9/cuda/ports9.cu" "$root/bench/ports9/scripts/gpu-job.sh" "$dest/"
du -sh "$dest"
