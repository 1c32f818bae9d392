#!/bin/bash
# Session 20 final call (2x H200): every GPU test binary and the Python package's suite
# (stage.sh/run.sh, JOBS=6) of merged main; on GPU 1 meanwhile bench/ports8 (the eighth held-out
# port, merged main) and bench/ports7 (BlockRowsX16 variant); then the held-out review's repros
# (built before the G20R fixes: they show the findings live; G20R-1 needs both GPUs).
set -u
root=$PWD
O=${OUT:-/tmp/final-out}
mkdir -p "$O"
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv > "$O/gpu.txt"
ngpu=$(nvidia-smi -L | wc -l)
benches() {
  cd "$root" && OUT="$O" bash .device-bin/port/job.sh > "$O/p8.txt" 2>&1
  cd "$root" && PORTS7_ONLY=V2 D=.device-bin/final-p7 OUT="$O/p7" bash .device-bin/final-p7/gpu-job.sh > "$O/p7.txt" 2>&1
}
if [ "$ngpu" -ge 2 ]; then
  ( CUDA_VISIBLE_DEVICES=1 benches ) &
else
  benches   # one GPU: the benches first, alone on it, then the tests
fi
( cd .device-bin/final && JOBS=6 OUT="$O/tests" ./run.sh > "$O/run.txt" 2>&1; echo "run.sh rc=$?" >> "$O/run.txt" )
wait
cd "$root" && OUT="$O" timeout 120 bash .device-bin/review/job.sh > "$O/review.txt" 2>&1
cd "$O" && tar cJf tests.tar.xz tests p7 2>/dev/null && rm -rf tests p7
ls -la "$O"
