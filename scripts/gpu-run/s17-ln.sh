#!/usr/bin/env bash
# Session 17 (branch s17-ln), for the folder staged by `scripts/gpu-run/stage-s17-ln.sh DEST`:
# `bash DEST/s17-ln.sh` (about 40-60 s; S17_LN_PASSES passes, default 4; the deadline
# S17_LN_DEADLINE_S, default 90, caps it). The summary is $OUT/s17-ln.txt (also printed), the
# logs in $OUT/s17-ln-logs.tar.xz.
#
# Each pass, twin and ours in one process (interleaved samples, medians):
#  ln    llm.c layernorm_backward_kernel10 (ports3), 264 blocks of 512, 8448 rows of 768:
#        "twin/Rust" of the first try, (fixed) and (regions) (session 16: 0.681 / 0.771 / 0.907).
#  rms   vLLM rms_norm (ports4), 4096 x 4096 bf16 at 1024 threads: first try, (fixed),
#        (broadcast), (cub's second level, Rust: the port's own), (warp 0's second level, nvcc)
#        (session 16: 0.950 / 0.934 / 0.969 / 0.993 / 1.002); the library's `RuntimeBlockReduce`
#        now has CUB's second level, so the first try, fixed and broadcast rows are its.
#  rms20 the same with 20 launches per event pair.
set -u
here=$(cd "$(dirname "$0")" && pwd)
dest=${OUT:-$here/out}
mkdir -p "$dest"
logs="$dest/s17-ln-logs"; mkdir -p "$logs"
export REQUIRE_GPU=1 RUST_BACKTRACE=1
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
began=$(date +%s)
deadline=${S17_LN_DEADLINE_S:-90}
passes=${S17_LN_PASSES:-4}
summary="$dest/s17-ln.txt"; : > "$summary"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader; echo "commit: $(cat "$here/commit.txt" 2>/dev/null) (uncommitted: $(cat "$here/dirty.txt" 2>/dev/null | tr '\n' ' '))"; } | tee -a "$summary"
. "$here/ports-run-lib.sh"
main_dest=$dest; dest=$logs
for b in ports3_bench ports4_bench; do
  [ -x "$here/$b" ] || { xz -dc "$here/$b.xz" > "$here/$b" && chmod +x "$here/$b"; }
done
twins="$here/twins"
for p in $(seq 1 "$passes"); do
  run "ln_$p" 20 "$here/ports3_bench" "$twins" layernorm_backward
  run "rms_$p" 12 "$here/ports4_bench" "$twins" rms_norm
  PORTS4_BATCH=20 run "rms20_$p" 12 "$here/ports4_bench" "$twins" rms_norm
done
dest=$main_dest
{
  for p in $(seq 1 "$passes"); do
    echo "==== pass $p"
    echo "---- layernorm_backward_kernel10 (twin/Rust; above 1: ours faster)"
    grep -E "twin/Rust" "$logs/ln_$p.log" 2>/dev/null | grep -v "^twin/Rust:" | tr -s ' '
    for f in rms rms20; do
      echo "---- rms_norm, $f"
      grep -E "^rms_norm_kernel.*twin/Rust" "$logs/${f}_$p.log" 2>/dev/null | tr -s ' '
    done
  done
  echo "---- checks"
  echo "checks ok: $(cat "$logs"/*.log 2>/dev/null | grep -c 'check.*: ok\|: ok$'), failed: $(cat "$logs"/*.log 2>/dev/null | grep -c 'FAILED')"
} | tee -a "$summary"
tar -C "$dest" -cJf "$dest/s17-ln-logs.tar.xz" s17-ln-logs 2>/dev/null && rm -rf "$logs"
if grep -q "FAILED" "$summary" || grep -E "^(ln|rms|rms20)_[0-9]+ " "$summary" | grep -qE "rc=[1-9]"; then echo "s17-ln: FAIL" | tee -a "$summary"; else echo "s17-ln: PASS" | tee -a "$summary"; fi
