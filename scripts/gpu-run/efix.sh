#!/usr/bin/env bash
# The GPU checks of audit 2026-11-27e's fixes (E1-E8; branch s11-efix). Usage:
#   bash scripts/gpu-run/efix.sh <dir>
# where <dir> holds the test binaries gpu_borrowed, gpu_host_seams, gpu_host_threads, gpu_rules
# (and optionally gpu_soundness, gpu_streams), plain or as <name>.xz (built with
# `cargo test --release -p ferrocuda-main --test <name> --no-run`). Runs from the repository
# root (the tests' children re-run their own binary). Output: $OUT/efix.txt (or ./efix.txt).
# Expected: every `test ... ok`, no FAILED; lines to look for:
#   e1: both refusals "belongs to context", the raw one "is memory of context";
#   e2: "FIRST LAUNCH of another crate after ..." (about 2 s: the grace), "E2 ALL RETURNED";
#   e3: "E3 threads .. shape ..: GPU elected lanes [0]" / [0, 32]; e4: GPU = CPU thread counts;
#   e5: the capture's graph replays (no panic); e8: "e8: launch inside: Err(..declared..)".
# About 30 s for the e-tests, then the whole binaries as far as BUDGET (185 s) goes; run with
# BUDGET=900 for all of them.
set -u
dir=${1:?usage: efix.sh <dir with the test binaries>}
out=${OUT:-.}
log="$out/efix.txt"
bin=$(mktemp -d)
for name in gpu_borrowed gpu_host_seams gpu_host_threads gpu_rules gpu_soundness gpu_streams; do
  if [ -f "$dir/$name.xz" ]; then xz -dc "$dir/$name.xz" > "$bin/$name"; elif [ -f "$dir/$name" ]; then cp "$dir/$name" "$bin/$name"; else continue; fi
  chmod +x "$bin/$name"
done
export REQUIRE_GPU=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$log" 2>&1
# Everything within BUDGET seconds (default 185: one `run` call of at most 200 s).
start=$(date +%s)
budget=${BUDGET:-185}
run() { # binary, timeout, filter...
  local name=$1 limit=$2; shift 2
  [ -x "$bin/$name" ] || { echo "### $name: not staged" >> "$log"; return; }
  local left=$((budget - ($(date +%s) - start)))
  if [ "$left" -lt 5 ]; then echo "### $name $*: skipped, the budget is spent" >> "$log"; return; fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "### $name $* (limit ${limit}s) $(date -u +%T)" >> "$log"
  timeout "$limit" "$bin/$name" "$@" --test-threads=1 --nocapture >> "$log" 2>&1
  echo "### exit $? $(date -u +%T)" >> "$log"
}
run gpu_borrowed 30 e1_
run gpu_host_seams 70 e2_
run gpu_host_seams 30 e5_
run gpu_host_threads 40 e8_
run gpu_rules 30 e3_
run gpu_rules 30 e4_
# Regressions of the touched paths: the whole binaries, as far as the budget goes.
run gpu_host_seams 90
run gpu_borrowed 60
run gpu_streams 40
run gpu_host_threads 90
run gpu_soundness 90
run gpu_rules 90
grep -E "^test .* (FAILED|ok)$|test result|^### " "$log" | tail -80
