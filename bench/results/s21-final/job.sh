#!/bin/bash
# Session 21 final call (one H200): the ports9 bench (first tries and fixes, twice) and ports8's
# wpe_backward rows first, alone on the GPU; then every GPU test binary and the Python package's
# suite (stage.sh/run.sh, JOBS=6) of merged main; then the held-out review's repros against the
# merged wheel.
set -u
root=$PWD
O=${OUT:-/tmp/final-out}
mkdir -p "$O"
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv > "$O/gpu.txt"
( cd .device-bin/final-p9 && OUT="$O" timeout 100 bash gpu-job.sh > "$O/p9.txt" 2>&1 )
( cd .device-bin/final-p8 && xz -dkf ports8_bench.xz && chmod +x ports8_bench && PORTS8_ONLY=L2 timeout 30 ./ports8_bench ports8_llmc.sm_90.cubin ports8_vllm.sm_90.cubin > "$O/p8.txt" 2>&1 )
( cd .device-bin/final && JOBS=6 OUT="$O/tests" ./run.sh > "$O/run.txt" 2>&1; echo "run.sh rc=$?" >> "$O/run.txt" )
cd "$root" && OUT="$O" timeout 150 bash .device-bin/review21/job.sh > "$O/review.txt" 2>&1
cd "$O" && tar cJf tests.tar.xz tests ports9 review 2>/dev/null && rm -rf tests ports9 review
ls -la "$O"
