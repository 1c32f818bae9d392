#!/usr/bin/env bash
# Stages issue 30's port benchmarks for scripts/gpu-run/ports.sh: the ports benchmark, the
# port-patterns benchmark, the two test binaries whose gpu:: tests cover what the ports rely on,
# the twins' source and ports.sh itself. Usage: scripts/gpu-run/stage-ports.sh DEST (a folder
# git ignores, e.g. .device-bin/ports); then on the GPU machine `DEST/ports.sh`. A `DEST/before/`
# folder with `ports_bench` and `port_patterns_bench` of an earlier commit (and its commit.txt)
# is run beside them.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=${1:?usage: stage-ports.sh <dest>}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
cd "$root"
copy_artifacts() { # cargo's JSON on stdin: copy each executable whose target name is listed
  python3 -c '
import json, sys, shutil
want = set(sys.argv[2:])
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] in want:
        shutil.copy(m["executable"], sys.argv[1] + "/" + m["target"]["name"])
' "$dest" "$@"
}
cargo build --release -p ferrocuda-ports --example ports_bench --message-format=json 2>/dev/null | copy_artifacts ports_bench
cargo build --release --example port_patterns_bench --message-format=json 2>/dev/null | copy_artifacts port_patterns_bench
cargo test --release --no-run --test cpu_half_floats --test port_patterns --message-format=json 2>/dev/null | copy_artifacts cpu_half_floats port_patterns
cp bench/cuda/ports.cu bench/cuda/llmc_cuda_utils.cuh scripts/gpu-run/ports.sh "$dest/"
git rev-parse HEAD > "$dest/commit.txt"
ls -la "$dest"
