#!/bin/bash
# Builds what run-on-gpu.sh needs (release test binaries and examples of
# ferrocuda-collectives) and copies them with the scripts into a folder to take to the GPU
# machine: $1, default <repo>/.device-bin/nccl. Then, on the GPU machine: <folder>/run.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=${1:-$root/.device-bin/nccl}
mkdir -p "$dest"
cd "$root"
cargo build --release -p ferrocuda-collectives --examples
cargo test --release -p ferrocuda-collectives --no-run --message-format=json 2>/dev/null |
  python3 -c '
import json, shutil, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"] and m["target"]["kind"] != ["example"]:
        name = m["target"]["name"] if m["target"]["kind"] != ["lib"] else "unittests"
        shutil.copy(m["executable"], sys.argv[1] + "/" + name)
' "$dest"
cp target/release/examples/data_parallel target/release/examples/allreduce_bench "$dest/"
cp collectives/bench/{run-on-gpu.sh,merge_results.py,nccl_allreduce_ref.cu,torch_allreduce_ref.py} "$dest/"
mv "$dest/run-on-gpu.sh" "$dest/run.sh"
chmod +x "$dest/run.sh"
du -sh "$dest"
