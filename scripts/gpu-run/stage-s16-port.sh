#!/usr/bin/env bash
# Stages session 16's port work (issue 30: optional inputs `Option<&[T]>`, the ports5 top-k with
# vLLM's `finished`) for scripts/gpu-run/s16-port.sh: the optional-input test binary
# (tests/optional_inputs.rs, built here) and the ports5 harness with its twins
# (scripts/gpu-run/stage-ports5.sh), xz-compressed. Usage: scripts/gpu-run/stage-s16-port.sh DEST
# (a folder git ignores, e.g. .device-bin/s16-port); then on the GPU machine `DEST/s16-port.sh`
# (about 40 s; under 120 s).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=${1:?usage: stage-s16-port.sh <dest>}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
cd "$root"
tests=$(cargo test --release --test optional_inputs --no-run --message-format=json 2>/dev/null | scripts/gpu-run/cargo-executable.py optional_inputs)
[ -n "$tests" ] || { echo "stage-s16-port.sh: the optional_inputs build failed" >&2; exit 1; }
xz -9 -T0 -c "$tests" > "$dest/optional_inputs.xz"
scripts/gpu-run/stage-ports5.sh "$dest/ports5" > /dev/null
cp scripts/gpu-run/s16-port.sh "$dest/"
git rev-parse HEAD > "$dest/commit.txt"
ls -la "$dest" "$dest/ports5"
