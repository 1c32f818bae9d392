#!/usr/bin/env bash
# Stages session 16's port work (issue 30: optional inputs `Option<&[T]>`, the launch-time
# bounds of `Cells3d` and `GridSlices`, the ports5 top-k with vLLM's `finished` and copy_and_cast
# in `GridSlices`) for scripts/gpu-run/s16-port.sh: the test binaries tests/optional_inputs.rs
# and tests/out_partitions.rs, ferrocuda-bench (its `partitions` case times `unpermute_3d`
# beside its twin) and the ports5 harness with its twins (scripts/gpu-run/stage-ports5.sh),
# xz-compressed. Usage: scripts/gpu-run/stage-s16-port.sh DEST
# (a folder git ignores, e.g. .device-bin/s16-port); then on the GPU machine `DEST/s16-port.sh`
# (about 40 s; under 120 s).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=${1:?usage: stage-s16-port.sh <dest>}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
cd "$root"
json=$(cargo test --release --test optional_inputs --test out_partitions --no-run --message-format=json 2>/dev/null)
for t in optional_inputs out_partitions; do
  exe=$(printf '%s\n' "$json" | scripts/gpu-run/cargo-executable.py "$t")
  [ -n "$exe" ] || { echo "stage-s16-port.sh: the $t build failed" >&2; exit 1; }
  xz -9 -T0 -c "$exe" > "$dest/$t.xz"
done
bench=$(cargo build --release -p ferrocuda-bench --bin ferrocuda-bench --message-format=json 2>/dev/null | scripts/gpu-run/cargo-executable.py ferrocuda-bench)
[ -n "$bench" ] || { echo "stage-s16-port.sh: the ferrocuda-bench build failed" >&2; exit 1; }
xz -9 -T0 -c "$bench" > "$dest/ferrocuda-bench.xz"
scripts/gpu-run/stage-ports5.sh "$dest/ports5" > /dev/null
cp scripts/gpu-run/s16-port.sh "$dest/"
git rev-parse HEAD > "$dest/commit.txt"
ls -la "$dest" "$dest/ports5"
