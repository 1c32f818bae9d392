#!/usr/bin/env bash
# Stages session 23 gaps' GPU job into DEST (default /work/main/.device-bin/gaps), from this
# branch's committed tree (run from a clean checkout of the branch):
# - ports10_bench / ports10_tests: bench/ports10 as this branch has it;
# - ports10_bench.main: the same bench code built with main's `device/src/block.rs` (the base
#   commit, BASE below), i.e. main's `RuntimeBlockReduce` beside this branch's (cases R*);
#   main's versions of L2 and V1 (the first tries and the fix round's forms) are in both.
# - ports10.cu (the ports' twins) and nvcc-s23.cu (the library checks' twins), job.sh.
# Then, on the GPU machine: bash .device-bin/gaps/job.sh (reports under $OUT/gaps/).
set -eu
root="$(cd "$(dirname "$0")/../../.." && pwd)"
dest="${1:-/work/main/.device-bin/gaps}"
BASE=${BASE:-6ca5407}
cd "$root"
git diff --quiet HEAD -- device/src/block.rs || { echo "stage.sh: device/src/block.rs has uncommitted changes"; exit 1; }
mkdir -p "$dest"
rm -f "$dest"/READY "$dest"/ports10_* "$dest"/*.xz "$dest"/*.cu "$dest"/job.sh "$dest"/commit.txt
cp device/src/block.rs /tmp/s23-block.rs.branch
git show "$BASE:device/src/block.rs" > device/src/block.rs
cargo build --release -p ferrocuda-ports10 --bins
cp target/release/ports10_bench "$dest/ports10_bench.main"
cp /tmp/s23-block.rs.branch device/src/block.rs
cargo build --release -p ferrocuda-ports10 --bins
cargo test --release -p ferrocuda-ports10 --test ports10 --no-run
tests="$(ls -t target/release/deps/ports10-* | grep -v '\.d$' | head -1)"
cp target/release/ports10_bench "$dest/ports10_bench"
cp "$tests" "$dest/ports10_tests"
xz -6 -T2 -f "$dest/ports10_bench" "$dest/ports10_bench.main" "$dest/ports10_tests"
cp bench/ports10/cuda/ports10.cu bench/results/s23-gaps/nvcc-s23.cu "$dest/"
cp bench/results/s23-gaps/job.sh "$dest/job.sh"
echo "s23-gaps $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' + uncommitted'); ports10_bench.main: the same with device/src/block.rs from $BASE" > "$dest/commit.txt"
du -sh "$dest"
