#!/usr/bin/env bash
# Session 15 (branch s15-ln), issue 30's remaining slow classes on a GPU, for the folder staged
# by `scripts/gpu-run/stage-ports-s15.sh DEST`: run `DEST/ports-s15.sh` (about 40 s; the
# deadline PORTS_S15_DEADLINE_S, default 58, caps it). Logs in $OUT (or DEST/out/); the
# summary is $OUT/s15-ln.txt (also printed).
#
# Steps and what to look for:
#  ln_bench      llm.c layernorm_backward_kernel10 (ports3), full size: "check ... ok" for the
#                first try, (fixed) and (regions) variants, and three "twin/Rust" rows; the
#                (regions) row is session 15's (`SharedSliceX4` regions: no per-access
#                alignment test, warp 0's loop over the other warps' slots unrolled).
#                Before: first try 0.57-0.61, fixed 0.64-0.65.
#  ln_racecheck  compute-sanitizer racecheck of the three and the twin at the small size
#                ("RACECHECK SUMMARY: 0 hazards"); ln_memcheck the same under memcheck.
#  rms_*         vLLM rms_norm (ports4): rows "rms_norm_kernel" (first try, before 0.92),
#                "(fixed)" (0.91) and "(broadcast)" (session 15's `sum_broadcast`: the twin's
#                2 barriers with `s` computed once, before the second); as measured before (one
#                launch per event pair), then with 20 launches per event pair
#                (PORTS4_BATCH=20), then with the twin first in each interleaved run
#                (PORTS4_TWIN_FIRST=1). Their SASS loops equal the twin's; if the ratios move
#                to ~1 with the batch, the 8% is the one-launch sample (host submission inside
#                the window), not the kernel; if only the order moves them, an order effect.
set -u
here=$(cd "$(dirname "$0")" && pwd)
dest=${OUT:-$here/out}
mkdir -p "$dest"
export REQUIRE_GPU=1 RUST_BACKTRACE=1
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
began=$(date +%s)
deadline=${PORTS_S15_DEADLINE_S:-58}
summary="$dest/s15-ln.txt"; : > "$summary"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader; echo "commit: $(cat "$here/commit.txt" 2>/dev/null)"; } | tee -a "$summary"
. "$here/ports-run-lib.sh"
for b in ports3_bench ports4_bench; do
  [ -x "$here/$b" ] || { xz -dc "$here/$b.xz" > "$here/$b" && chmod +x "$here/$b"; }
done
twins="$here/twins"
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
run ln_bench 20 "$here/ports3_bench" "$twins" layernorm_backward
run rms_per_launch 8 "$here/ports4_bench" "$twins" rms_norm
PORTS4_BATCH=20 run rms_batch20 8 "$here/ports4_bench" "$twins" rms_norm
PORTS4_TWIN_FIRST=1 run rms_twin_first 8 "$here/ports4_bench" "$twins" rms_norm
# Checks only (no timing) at the small size: the sanitizers see every variant and the twin.
PORTS3_RUNS=0 PORTS3_SMALL=1 run ln_racecheck 15 "$sanitizer" --tool racecheck --report-api-errors no "$here/ports3_bench" "$twins" layernorm_backward
PORTS3_RUNS=0 PORTS3_SMALL=1 run ln_memcheck 10 "$sanitizer" --tool memcheck --report-api-errors no "$here/ports3_bench" "$twins" layernorm_backward
{
  echo "---- layernorm_backward_kernel10 (twin/Rust; above 1: ours faster)"
  grep -E "twin/Rust" "$dest/ln_bench.log" | sed -E 's/ +Rust .*twin\/Rust/:/' | tr -s ' '
  for f in rms_per_launch rms_batch20 rms_twin_first; do
    echo "---- rms_norm, $f"
    grep -E "^rms_norm_kernel" "$dest/$f.log" | tr -s ' '
  done
  echo "---- checks and sanitizers"
  echo "checks ok: $(cat "$dest"/ln_bench.log "$dest"/rms_*.log 2>/dev/null | grep -c 'check.*: ok'), failed: $(cat "$dest"/*.log | grep -c 'FAILED')"
  grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" "$dest/ln_racecheck.log" "$dest/ln_memcheck.log" 2>/dev/null
} | tee -a "$summary"
# FAIL: a failed check, a step that did not exit 0 (or timed out), or racecheck without its
# clean summary.
if grep -q FAILED "$dest"/*.log || grep -qE "rc=[1-9]" "$summary" || ! grep -q "RACECHECK SUMMARY: 0 hazards" "$dest/ln_racecheck.log" 2>/dev/null; then echo "s15-ln: FAIL" | tee -a "$summary"; else echo "s15-ln: PASS" | tee -a "$summary"; fi
