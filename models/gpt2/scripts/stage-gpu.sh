#!/usr/bin/env bash
# Stages the GPT-2 trainer, its GPU test and the PyTorch reference for a GPU machine without
# cargo: builds here, copies into $DEST (default /work/main/.device-bin/s11-gpt2, git-ignored),
# with gpu-run.sh (the jobs) and agreement.sh (the PyTorch agreement job) beside them. Optional: LLMC=/path/to/llm.c checkout to carry
# llm.c's sources (train_gpt2.cu, llmc/, Makefile) for the same-job reference; nothing of it
# enters this repository.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
dest=${DEST:-/work/main/.device-bin/s11-gpt2}
cd "$root"
rm -rf "$dest"; mkdir -p "$dest"
cargo build --release -p ferrocuda-gpt2 --bin gpt2
cp target/release/gpt2 "$dest/"
cargo test --release -p ferrocuda-gpt2 --test gpu_torch_agreement --no-run --message-format=json 2>/dev/null | python3 -c '
import json, shutil, sys
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        shutil.copy(m["executable"], sys.argv[1] + "/" + m["target"]["name"])
' "$dest"
# The library's GPU tests, for its attention calls (KERNELS_TESTS=1).
if [ -n "${KERNELS_TESTS:-}" ]; then
  cargo test --release -p ferrocuda-kernels --test gpu_kernels_lib --no-run --message-format=json 2>/dev/null | python3 -c '
import json, shutil, sys
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        shutil.copy(m["executable"], sys.argv[1] + "/" + m["target"]["name"])
' "$dest"
fi
cp models/gpt2/reference/gpt2_torch.py models/gpt2/scripts/gpu-run.sh models/gpt2/scripts/agreement.sh "$dest/"
if [ -n "${LLMC:-}" ]; then
  git -C "$LLMC" archive --format=tar HEAD train_gpt2.cu Makefile llmc | xz -9 > "$dest/llmc.tar.xz"
fi
xz -9e "$dest/gpt2" "$dest/gpu_torch_agreement"
[ -e "$dest/gpu_kernels_lib" ] && xz -9 "$dest/gpu_kernels_lib"
ls -la "$dest"; du -sh "$dest"
