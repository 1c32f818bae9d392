#!/bin/bash
# Session 21, helper gaps: one GPU call. Staged under .device-bin/gaps by stage.sh (this folder).
# Twins built on the build machine with nvcc 13.0.88 (the GPU machine's release) and the ports'
# flags. Each bench binary (ports8's wpe_backward, ports7's static int8 quantiser) as built before (main e62e36e's target) and after (s21-gaps), twice,
# alternating; then the touched ports' tests with REQUIRE_GPU=1.
set -u
D=$(cd "$(dirname "$0")" && pwd)
O=${OUT:-/tmp/gaps-out}
mkdir -p "$O"
cd "$D"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > "$O/gpu.txt"
for f in *.xz; do xz -dkf "$f"; done
chmod +x ports8_bench.* ports7_bench.* ports6_bench.* ports8_tests 2>/dev/null
{
echo "== ports8 tests"; REQUIRE_GPU=1 timeout 30 ./ports8_tests --test-threads=2 2>&1 | tail -25
} > "$O/tests.txt" 2>&1
echo done >> "$O/tests.txt"
{
for run in 1 2; do
  for v in before after; do
    echo "== run $run, ports8 L2, $v"
    PORTS8_ONLY=L2 timeout 20 ./ports8_bench.$v ports8_llmc.sm_90.cubin ports8_vllm.sm_90.cubin
    echo "== run $run, ports7 V2, $v"
    PORTS7_ONLY=V2 timeout 20 ./ports7_bench.$v ports7_llmc.sm_90.cubin ports7_vllm.sm_90.cubin
  done
done
# bench/ports6's kernels whose SASS the builder's run-time unrolling changed (once each).
for v in before after; do
  echo "== ports6 L2,L3,L4,L5,V3, $v"
  [ -x ports6_bench.$v ] && PORTS6_ONLY=L2,L3,L4,L5,V3 timeout 30 ./ports6_bench.$v ports6_llmc.sm_90.cubin ports6_vllm.sm_90.cubin
done
} > "$O/bench.txt" 2>&1
echo done >> "$O/bench.txt"
