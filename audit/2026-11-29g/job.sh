#!/bin/bash
# Session 24 held-out review 2 (audit/2026-11-29g): GPU repros of G24S-1 (PermutedRows' wrapped
# row start) and G24S-2 (a cfg-chosen radix the layout check misses). About 6 s: 2 GiB buffer, 2^32 - 2560 threads. Prints REPRODUCED / NOT REPRODUCED / SKIPPED.
set -u
export REQUIRE_GPU=1
here=$(cd "$(dirname "$0")" && pwd)
O=${OUT:-/tmp/review2-out}/review2; mkdir -p "$O"
LOG="$O/results.txt"
nvidia-smi -L > "$LOG" 2>&1
bin=$(mktemp -d)
xz -dc "$here/g24s1-host.xz" > "$bin/g24s1-host"; chmod +x "$bin/g24s1-host"
{
  echo "== G24S-1 on the GPU"; timeout 20 "$bin/g24s1-host" gpu; echo "rc=$?"
  # Its own process: a trap poisons the process's context.
  echo "== G24S-2 on the GPU"; timeout 8 "$bin/g24s1-host" gpu2; echo "rc=$?"
} >> "$LOG" 2>&1
rm -rf "$bin"
cat "$LOG"
