#!/usr/bin/env bash
# Session 16 (branch s16-ln), issue 30's two slow classes on a GPU, for the folder staged by
# `scripts/gpu-run/stage-s16-ln.sh DEST`: run `bash DEST/s16-ln.sh` (about 60-90 s; the
# deadline S16_LN_DEADLINE_S, default 110, caps it). Logs in $OUT (or DEST/out/); the summary is
# $OUT/s16-ln.txt (also printed), the rest in $OUT/s16-ln-logs.tar.xz.
#
# Steps and what to look for:
#  ln_bench      llm.c layernorm_backward_kernel10 (ports3), full size (264 blocks of 512, 8448
#                rows of 768): "twin/Rust" rows for the first try, (fixed) and (regions). Session
#                15 (H200): 0.602 / 0.638 / 0.732. Session 16 changed the library's handoff: the
#                last block's fold issues four rows' loads before folding (SASS: eight
#                LDG.E.128 in a row, as nvcc's; it was two rows, then two more) and its fences
#                are fence.acq_rel.gpu (MEMBAR.ALL.GPU) not fence.sc.gpu.
#  rms_bench     vLLM rms_norm (ports4), 4096 x 4096 bf16 at 1024 threads: "twin/Rust" of the
#                first try, (fixed) and (broadcast) (session 15: 0.91 / 0.90 / 0.92); then 20
#                launches per event pair (rms_batch20). Two diagnostics of where the 8% is,
#                each timed against the twin: "(cub's second level, Rust)" is the broadcast
#                variant with cub's second level written in the port (thread 0 adds the 32 warp
#                sums; the library's warp 0 folds them by shuffles); "(warp 0's second level,
#                nvcc)" is the twin with the library's second level. If the first is ~1 and the
#                second ~0.92, the library's second level is the gap; if both stay where the
#                broadcast variant and the twin are, it is not (then the ncu step says where).
#  out_partitions  the partitions' GPU tests with REQUIRE_GPU=1 (the handoff's among them, and
#                p30_s16_handoff_fold_column_.. : every remainder of four rows, a short buffer).
#  ncu_rms / ncu_ln_twin / ncu_ln_regions  (skipped with NO_NCU=1) Nsight Compute on the first launch of each kernel
#                (ours and the twin): duration, occupancy, warp stall reasons, and the
#                per-SASS-instruction stall samples (ncu_*_source.csv): where the time goes in
#                ours and in nvcc's. Diagnostics only: a missing ncu or counter permission is
#                reported, not a failure.
set -u
here=$(cd "$(dirname "$0")" && pwd)
dest=${OUT:-$here/out}
mkdir -p "$dest"
logs="$dest/s16-ln-logs"; mkdir -p "$logs"
export REQUIRE_GPU=1 RUST_BACKTRACE=1
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
began=$(date +%s)
deadline=${S16_LN_DEADLINE_S:-110}
summary="$dest/s16-ln.txt"; : > "$summary"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader; echo "commit: $(cat "$here/commit.txt" 2>/dev/null)"; } | tee -a "$summary"
# ports-run-lib.sh's `run` writes NAME.log into $dest: point it at the logs folder.
. "$here/ports-run-lib.sh"
main_dest=$dest; dest=$logs
for b in ports3_bench ports4_bench out_partitions; do
  [ -x "$here/$b" ] || { xz -dc "$here/$b.xz" > "$here/$b" && chmod +x "$here/$b"; }
done
twins="$here/twins"
run ln_bench 25 "$here/ports3_bench" "$twins" layernorm_backward
run rms_bench 12 "$here/ports4_bench" "$twins" rms_norm
PORTS4_BATCH=20 run rms_batch20 12 "$here/ports4_bench" "$twins" rms_norm
run out_partitions 60 "$here/out_partitions" --test-threads 1
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
sections="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section SourceCounters"
if [ -x "$ncu" ] && [ "${NO_NCU:-0}" != 1 ]; then
  # The bench's check launches come first: rms: ours, twin, fixed, broadcast, cub, twin with
  # warp 0's second level; layernorm: the
  # first try, the twin, fixed, regions (PORTS*_RUNS small: few timed launches after them).
  PORTS4_RUNS=1 run ncu_rms 40 "$ncu" -k regex:rms_norm -c 6 $sections -f -o "$logs/ncu_rms" "$here/ports4_bench" "$twins" rms_norm
  # layernorm: the twin's first launch (its mangled name), then the regions variant's.
  PORTS3_RUNS=1 PORTS3_REPS=1 run ncu_ln_twin 25 "$ncu" --kernel-name-base mangled -k regex:^_Z27layernorm_backward_kernel10 -c 1 $sections -f -o "$logs/ncu_ln_twin" "$here/ports3_bench" "$twins" layernorm_backward
  PORTS3_RUNS=1 PORTS3_REPS=1 run ncu_ln_regions 25 "$ncu" -k regex:layernorm_backward_kernel10_regions -c 1 $sections -f -o "$logs/ncu_ln_regions" "$here/ports3_bench" "$twins" layernorm_backward
  for r in ncu_rms ncu_ln_twin ncu_ln_regions; do
    [ -f "$logs/$r.ncu-rep" ] || continue
    timeout 10 "$ncu" --import "$logs/$r.ncu-rep" --page details > "$logs/${r}_details.log" 2>&1
    timeout 10 "$ncu" --import "$logs/$r.ncu-rep" --page source --print-source sass --csv > "$logs/${r}_source.csv" 2>&1
  done
else
  echo "ncu: not found (diagnostics skipped)" | tee -a "$summary"
fi
dest=$main_dest
{
  echo "---- layernorm_backward_kernel10 (twin/Rust; above 1: ours faster)"
  grep -E "twin/Rust" "$logs/ln_bench.log" | tr -s ' '
  for f in rms_bench rms_batch20; do
    echo "---- rms_norm, $f"
    grep -E "^rms_norm_kernel" "$logs/$f.log" | tr -s ' '
  done
  echo "---- checks"
  echo "checks ok: $(cat "$logs"/ln_bench.log "$logs"/rms_*.log 2>/dev/null | grep -c 'check.*: ok\|: ok$'), failed: $(cat "$logs"/ln_bench.log "$logs"/rms_*.log | grep -c 'FAILED')"
  grep -E "^test result|FAILED|panicked" "$logs/out_partitions.log" | head -5
  for r in ncu_rms ncu_ln_twin ncu_ln_regions; do
    [ -f "$logs/${r}_details.log" ] || { echo "---- $r: no report ($(tail -2 "$logs/$r.log" 2>/dev/null | tr '\n' ' '))"; continue; }
    echo "---- $r (rms, in launch order: first try, twin, fixed, broadcast, cub, twin-warp0)"
    grep -E "^  [a-zA-Z_0-9]+.*\([0-9]+, [0-9]+, [0-9]+\)x|Duration|Registers Per Thread|Achieved Occupancy|Warp Cycles Per Issued Instruction|Issue Slots Busy|Memory Throughput|DRAM Throughput|L1/TEX Hit Rate|L2 Hit Rate" "$logs/${r}_details.log" | tr -s ' '
  done
} | tee -a "$summary"
tar -C "$dest" -cJf "$dest/s16-ln-logs.tar.xz" s16-ln-logs 2>/dev/null && rm -rf "$logs"
# FAIL: a failed check or test, or a bench/test step that did not exit 0 (ncu steps excepted).
if grep -q "FAILED" "$summary" || grep -E "^(ln_bench|rms_bench|rms_batch20|out_partitions) " "$summary" | grep -qE "rc=[1-9]"; then echo "s16-ln: FAIL" | tee -a "$summary"; else echo "s16-ln: PASS" | tee -a "$summary"; fi
