#!/usr/bin/env bash
# Issue 30's ports on a GPU: the ported public kernels (bench/ports) and the block-reduce row
# sums (examples/port_patterns_bench.rs) against their CUDA C++ twins, for the binaries staged
# by `scripts/gpu-run/stage-ports.sh DEST` (optionally beside a `before/` folder holding the
# same two examples built from an earlier commit, run in the same call on the same card), plus
# the GPU tests of what the ports rely on (REQUIRE_GPU=1: nothing skips).
#
# On the GPU machine: `DEST/ports.sh` (about 90 s). The logs go to one archive,
# $OUT/ports-logs.tgz (or DEST/out/), beside summary.txt; the summary and the benchmark tables
# are printed too.
# Look for: every "check ... ok", "twin/Rust" per kernel in ports_*.log, the row-sum table in
# patterns_*.log, and "test result: ok" in the test logs (summary.txt lists each rc).
set -u
here=$(cd "$(dirname "$0")" && pwd)
dest=${OUT:-$here/out}
mkdir -p "$dest"
out=$(mktemp -d)
export REQUIRE_GPU=1 RUST_BACKTRACE=1
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv; echo "after: $(cat "$here/commit.txt" 2>/dev/null)"; echo "before: $(cat "$here/before/commit.txt" 2>/dev/null)"; } | tee "$out/device.txt"
summary="$out/summary.txt"; : > "$summary"
began=$(date +%s)
deadline=${PORTS_DEADLINE_S:-200} # the whole script stays under this many seconds
run() { # name, timeout, command...
  local name=$1 limit=$2; shift 2
  local start=$(date +%s)
  local left=$(( deadline - (start - began) ))
  if [ "$left" -lt 10 ]; then echo "SKIPPED $name: past the ${deadline} s deadline" | tee -a "$summary"; return; fi
  [ "$limit" -gt "$left" ] && limit=$left
  timeout "$limit" "$@" > "$out/$name.log" 2>&1; local rc=$?
  local results=$(grep -E '^test result' "$out/$name.log" | sed -E 's/test result: //; s/; finished.*//' | tr '\n' ' ')
  printf '%-26s rc=%-3s %4ss %s\n' "$name" "$rc" "$(( $(date +%s) - start ))" "${results:0:110}" | tee -a "$summary"
}
# The twins, compiled here with the flags their projects use (llm.c: --use_fast_math).
mkdir -p "$out/twins"
nvcc=/usr/local/cuda/bin/nvcc
$nvcc -cubin -O3 -arch=sm_90 -DPORTS_VLLM "$here/ports.cu" -o "$out/twins/ports_vllm.cubin" > "$out/nvcc.log" 2>&1
$nvcc -cubin -O3 -arch=sm_90 -DPORTS_LLMC --use_fast_math "$here/ports.cu" -o "$out/twins/ports_llmc.cubin" >> "$out/nvcc.log" 2>&1
# Two passes each, before and after interleaved, so that drift shows.
for pass in 1 2; do
  [ -x "$here/before/ports_bench" ] && run "ports_before_$pass" 60 "$here/before/ports_bench" "$out/twins"
  run "ports_after_$pass" 60 "$here/ports_bench" "$out/twins"
done
[ -x "$here/before/port_patterns_bench" ] && run patterns_before 60 "$here/before/port_patterns_bench"
run patterns_after 60 "$here/port_patterns_bench"
for t in cpu_half_floats port_patterns; do
  [ -x "$here/$t" ] && run "$t" 60 "$here/$t" gpu:: --test-threads=1
done
echo "---- ratios (twin/Rust) per pass:" | tee -a "$summary"
for f in "$out"/ports_*.log; do echo "$(basename "$f" .log): $(grep -E 'twin/Rust' "$f" | awk '{print $1, $NF}' | tr '\n' ' ')" | tee -a "$summary"; done
cp "$summary" "$dest/summary.txt"
tar -czf "$dest/ports-logs.tgz" -C "$out" --exclude twins .
echo "==== tables"
for f in "$out"/ports_*.log "$out"/patterns_*.log; do echo "== $(basename "$f")"; grep -v -E '^\s+check .*: ok$' "$f"; done
