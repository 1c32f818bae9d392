#!/usr/bin/env bash
# Issue 30's fifth held-out port on a GPU, for the files staged by
# `scripts/gpu-run/stage-ports5.sh DEST`: builds the nvcc twins with this machine's nvcc (the
# staged cubins, built by nvcc 13 at staging, when it has none), then runs the harness with
# REQUIRE_GPU=1: every port (first try, and the fixed variant) checked against its twin on
# the GPU and timed beside it. Prints one table: kernel, correct (y/n), first-try ratio and
# fixed ratio (nvcc's time over ours), unsafe needed (y/n).
#
# On the GPU machine: `DEST/ports5.sh` (about 30 s; under 120 s). Everything it prints also goes
# to $OUT/ports5.txt (or DEST/out/ports5.txt). Look for "PASS: every port matches its twin".
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/out}
mkdir -p "$out"
log="$out/ports5.txt"
export REQUIRE_GPU=1 RUST_BACKTRACE=1
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv
  echo "commit: $(cat "$here/commit.txt" 2>/dev/null)"
  # Always from the staged archive: a binary left by an earlier staging would be stale.
  xz -dc "$here/ports5_bench.xz" > "$here/ports5_bench" && chmod +x "$here/ports5_bench"
  twins="$here/twins"
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  if [ -x "$nvcc" ]; then
    mkdir -p "$out/twins"
    if timeout 60 "$nvcc" -cubin -O3 -arch=sm_90 -DPORTS5_LLMC --use_fast_math "$here/ports5.cu" -o "$out/twins/ports5_llmc.cubin" &&
       timeout 60 "$nvcc" -cubin -O3 -arch=sm_90 -DPORTS5_VLLM "$here/ports5.cu" -o "$out/twins/ports5_vllm.cubin"; then
      twins="$out/twins"; echo "twins: built here by $("$nvcc" --version | tail -1)"
    else
      echo "twins: this machine's nvcc failed; using the staged cubins"
    fi
  else
    echo "twins: no nvcc here; using the staged cubins (nvcc 13, built at staging)"
  fi
  start=$(date +%s)
  timeout 100 "$here/ports5_bench" "$twins"; rc=$?
  echo "ports5_bench rc=$rc in $(( $(date +%s) - start )) s"
  exit "$rc"
} 2>&1 | tee "$log"
exit "${PIPESTATUS[0]}"
