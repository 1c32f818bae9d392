#!/usr/bin/env bash
# Stages session 23 gaps' GPU job into DEST (default /work/main/.device-bin/gaps), from this
# branch's tree: bench/ports10's bench and test binaries (xz), the ports' twins (ports10.cu),
# the library checks' twins (nvcc-s23.cu), job.sh. (The mid-session job also carried a
# `ports10_bench.main` built with main's device/src/block.rs, for the RuntimeBlockReduce A/B;
# that change was reverted after it, so the final job has no second binary.)
# Then, on the GPU machine: bash .device-bin/gaps/job.sh (one file back: $OUT/gaps.tar.xz).
set -eu
root="$(cd "$(dirname "$0")/../../.." && pwd)"
dest="${1:-/work/main/.device-bin/gaps}"
cd "$root"
mkdir -p "$dest"
rm -f "$dest"/READY "$dest"/ports10_* "$dest"/*.xz "$dest"/*.cu "$dest"/job.sh "$dest"/commit.txt
cargo build --release -p ferrocuda-ports10 --bins
cargo test --release -p ferrocuda-ports10 --test ports10 --no-run
tests="$(ls -t target/release/deps/ports10-* | grep -v '\.d$' | head -1)"
cp target/release/ports10_bench "$dest/ports10_bench"
cp "$tests" "$dest/ports10_tests"
xz -6 -T2 -f "$dest/ports10_bench" "$dest/ports10_tests"
cp bench/ports10/cuda/ports10.cu bench/results/s23-gaps/nvcc-s23.cu "$dest/"
cp bench/results/s23-gaps/job.sh "$dest/job.sh"
echo "s23-gaps $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' + uncommitted')" > "$dest/commit.txt"
du -sh "$dest"
