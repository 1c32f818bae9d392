#!/bin/bash
# Session 20 helper "gaps": bench/ports7 (V1 act_and_mul, V2 static int8 incl. the BlockRowsX16
# variant) and bench/ports6 (L4 softmax incl. the x4 form, V1 gelu_new, V2 int8 azp), each as
# built before the library change (main's library) and after, alternating, twice, in one call.
# Twin cubins precompiled here with nvcc 13.0.88 (the GPU machine's release), same flags as
# the ports' gpu-job.sh.
set -u
D=.device-bin/gaps
OUT=${OUT:-/tmp/gaps-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv | tee "$OUT/gpu.txt"
cd "$D" || exit 1
for b in ports7_bench.before ports7_bench.after ports6_bench.before ports6_bench.after; do
  xz -dkf $b.xz && chmod +x $b
done
for run in 1 2; do
  for v in before after; do
    echo "== ports7 $v run $run" | tee -a "$OUT/bench.txt"
    PORTS7_ONLY=V1,V2 timeout 15 ./ports7_bench.$v ports7_llmc.sm_90.cubin ports7_vllm.sm_90.cubin 2>&1 | tee -a "$OUT/bench.txt"
  done
done
for run in 1 2; do
  for v in before after; do
    echo "== ports6 $v run $run" | tee -a "$OUT/bench.txt"
    PORTS6_ONLY=L4,V1,V2 timeout 12 ./ports6_bench.$v ports6_llmc.sm_90.cubin ports6_vllm.sm_90.cubin 2>&1 | tee -a "$OUT/bench.txt"
  done
done
