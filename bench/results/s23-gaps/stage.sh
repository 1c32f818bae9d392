#!/usr/bin/env bash
# Stages session 23 gaps' GPU job into DEST (default /work/main/.device-bin/gaps): this branch's
# bench/ports10 bench and test binaries (xz), the twins' source and job.sh. Build first:
#   cargo build --release -p ferrocuda-ports10 --bins && cargo test --release -p ferrocuda-ports10 --test ports10 --no-run
# Then, on the GPU machine: bash .device-bin/gaps/job.sh (reports under $OUT/gaps/).
set -eu
root="$(cd "$(dirname "$0")/../../.." && pwd)"
dest="${1:-/work/main/.device-bin/gaps}"
mkdir -p "$dest"
rm -f "$dest"/READY "$dest"/ports10_* "$dest"/*.xz "$dest"/job.sh "$dest"/commit.txt
tests="$(ls -t "$root"/target/release/deps/ports10-* | grep -v '\.d$' | head -1)"
cp "$root/target/release/ports10_bench" "$dest/ports10_bench"
cp "$tests" "$dest/ports10_tests"
xz -6 -T2 -f "$dest/ports10_bench" "$dest/ports10_tests"
cp "$root/bench/ports10/cuda/ports10.cu" "$dest/"
cp "$root/bench/results/s23-gaps/job.sh" "$dest/job.sh"
(cd "$root" && echo "s23-gaps $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' + uncommitted')") > "$dest/commit.txt"
du -sh "$dest"
