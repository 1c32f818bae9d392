#!/usr/bin/env bash
# Session 13's attention job (issue 31, branch s13-attn): the backward's new prep (a warp reads
# its 32 rows of O and dO together), timed beside the previous binary
# (`bench_attention_base`, main before the branch) and PyTorch SDPA in one job, with ncu kernel
# durations of one short shape for both, and the GPU tests of the sm_90 backward. Staged by
# scripts/gpu-run/attn-s13.sh; on the GPU machine: `bash attn-s13-job.sh` (results under $OUT:
# summary.txt and s13.tar.gz). 64 s on an H100 (SDPA to S 2k), 87 s on an H200 (everything
# below with FULL_TESTS=1). Knobs: SDPA_MAX_S (default 8192),
# NCU=0 (skip ncu), NCU_SHAPES, BASE=0 (skip the previous binary), WG=0 (skip the instance
# comparison), FULL_TESTS=1 (then the long attention_backward_on_sm_90_matches_f64, FULL_S s).
# Look for: "tests rc=0", the two tables' backward ours/cuDNN columns (base-table.md,
# table.md), the ncu durations (prep, kernel, dq_convert) before and after.
cd "$(dirname "$0")"; for f in *.xz; do xz -dkf "$f" && chmod +x "${f%.xz}"; done
export REQUIRE_GPU=1 RUST_BACKTRACE=1 LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
R=$OUT/s13; mkdir -p $R
exec > >(tee $OUT/summary.txt) 2>&1
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader
filters="s13_ attention_backward_with_scratch_on_sm_90 attention_backward_on_misaligned"
start=$SECONDS
timeout ${TESTS_S:-45} ./gpu_kernels_lib $filters --test-threads=1 > $R/tests.txt 2>&1; echo "tests rc=$? ($((SECONDS-start)) s)"
grep -h "^test \|test result\|panicked" $R/tests.txt
bench() { # $1 binary, $2 tag, then env
  local bin=$1 tag=$2; shift 2
  start=$SECONDS
  env BENCH_MMA=0 BENCH_REPEAT=3 "$@" timeout ${BENCH_S:-60} ./$bin $R/$tag.jsonl > $R/$tag.txt 2>$R/$tag.err; echo "$tag rc=$? ($((SECONDS-start)) s)"
  grep "^D" $R/$tag.txt
}
[ "${BASE:-1}" = 1 ] && bench bench_attention_base base BENCH_WG=0
bench bench_attention ours BENCH_WG=0
[ "${WG:-1}" = 1 ] && bench bench_attention wg BENCH_WG=1 BENCH_MAX_S=${WG_MAX_S:-1024}
if [ "${NCU:-1}" = 1 ]; then
  for b in bench_attention_base bench_attention; do
    for shape in ${NCU_SHAPES:-128,512,0 128,1024,1}; do
      [ "${BASE:-1}" = 0 ] && [ $b = bench_attention_base ] && continue
      BENCH_ONLY=$shape BENCH_WG=0 BENCH_MMA=0 BENCH_REPEAT=1 timeout 40 /usr/local/cuda/bin/ncu --clock-control none --metrics gpu__time_duration.sum --kernel-name regex:backward --launch-count 8 ./$b > $R/ncu-$b-$shape.log 2>&1
      echo "ncu $b $shape rc=$?"; grep -E "^  attention|duration" $R/ncu-$b-$shape.log | sed -n 1,16p | awk '{printf "%s %s %s\n", $1, $2, $3}' | paste - - | head -8
    done
  done
fi
start=$SECONDS
BENCH_REPEAT=3 BENCH_MAX_S=${SDPA_MAX_S:-8192} timeout ${SDPA_S:-60} python3 attention_sdpa.py $R/sdpa.jsonl > $R/sdpa.txt 2>&1; echo "sdpa rc=$? ($((SECONDS-start)) s)"
for tag in base ours; do
  [ -s $R/$tag.jsonl ] || continue
  python3 attention_table.py $R/$tag.jsonl $R/sdpa.jsonl $R/$tag-table.json $R/$tag-table.md "$gpu" > /dev/null 2>&1
  echo "== $tag"; cat $R/$tag-table.md
done
[ -s $R/wg.jsonl ] && python3 attention_table.py $R/wg.jsonl $R/sdpa.jsonl $R/wg-table.json $R/wg-table.md "$gpu" > /dev/null 2>&1 && { echo "== wg"; cat $R/wg-table.md; }
# FULL_TESTS=1: the long f64 test of every sm_90 backward instance (s12's job gave it under 60 s
# with nine other tests and timed out), for FULL_S seconds.
if [ "${FULL_TESTS:-0}" = 1 ]; then
  start=$SECONDS
  timeout ${FULL_S:-60} ./gpu_kernels_lib attention_backward_on_sm_90_matches_f64 --test-threads=1 > $R/tests-full.txt 2>&1; echo "full test rc=$? ($((SECONDS-start)) s)"
  grep -h "^test \|test result\|panicked" $R/tests-full.txt
fi
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader
cp $OUT/summary.txt $R/ 2>/dev/null; tar czf $OUT/s13.tar.gz -C $OUT s13 && rm -rf $R
