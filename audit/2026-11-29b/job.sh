#!/bin/bash
# Session 22 held-out review (audit/2026-11-29b): GPU repros of G22R-1. At most 5 x 4 s plus nvidia-smi.
# Results in $OUT/review/results.txt; each repro prints REPRODUCED / NOT REPRODUCED / SKIPPED.
set -u
export REQUIRE_GPU=1
here=$(cd "$(dirname "$0")" && pwd)
O=${OUT:-/tmp/review-out}/review; mkdir -p "$O"
LOG="$O/results.txt"
nvidia-smi -L > "$LOG" 2>&1
bin=$(mktemp -d)
xz -dc "$here/g22r1-host.xz" > "$bin/g22r1-host"; chmod +x "$bin/g22r1-host"
{
  echo "== G22R-1 CPU executor (expect Ok and guard 7s: the CPU sees nothing)"
  timeout 4 "$bin/g22r1-host" cpu; echo "rc=$?"
  # One process per kernel: a fault poisons the process's contexts.
  for w in gpu-len gpu-far gpu-reduce gpu-tag; do
    echo "== G22R-1 $w"; timeout 4 "$bin/g22r1-host" $w; echo "rc=$?"
  done
} >> "$LOG" 2>&1
cat "$LOG"
