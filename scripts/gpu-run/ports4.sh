#!/usr/bin/env bash
# Issue 30's fourth held-out port on a GPU, for the binaries staged by
# `scripts/gpu-run/stage-ports4.sh DEST`: the GPU tests (REQUIRE_GPU=1), the benchmark twice
# (each port checked against its CPU reference, then timed beside its nvcc-built twin, CUDA
# events, interleaved, median), then compute-sanitizer memcheck on the ports (checks only, small
# shapes, no timing loops).
#
# On the GPU machine: `DEST/ports4.sh` (about 100 s; PORTS4_DEADLINE_S caps it, default 220).
# Logs go to $OUT (or DEST/out/): tests.log, bench_1.log, bench_2.log, memcheck.log, summary.txt.
# Look for: "test result: ok. 23 passed", every "check ...: ok", one "twin/Rust" per kernel in
# each pass (above 1: Rust is faster; softmax_autoregressive_backward_inplace_kernel and
# rms_norm_kernel also have a "(fixed)" row, and the softmax backward "(reqntid)" and "(fixed,
# reqntid)" rows: session 14's variants under `reqntid(256)`), "ERROR SUMMARY: 0 errors".
set -u
here=$(cd "$(dirname "$0")" && pwd)
dest=${OUT:-$here/out}
mkdir -p "$dest"
export REQUIRE_GPU=1 RUST_BACKTRACE=1
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
began=$(date +%s)
deadline=${PORTS4_DEADLINE_S:-220}
summary="$dest/summary.txt"; : > "$summary"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv; echo "commit: $(cat "$here/commit.txt" 2>/dev/null)"; } | tee "$dest/device.txt"
# The deadline-bounded `run NAME LIMIT COMMAND...` (staged beside this script).
. "$here/ports-run-lib.sh"
for b in ports4_bench ports4_tests; do
  [ -x "$here/$b" ] || { xz -dc "$here/$b.xz" > "$here/$b" && chmod +x "$here/$b"; }
done
twins="$here/twins"
run tests 60 "$here/ports4_tests" --test-threads=1
for pass in 1 2; do run "bench_$pass" 60 "$here/ports4_bench" "$twins"; done
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
# ferrocuda probes the twins' modules for its own globals and counts parameters by asking past
# the last one; those failed driver calls are expected, so API errors are not reported.
run memcheck 60 env PORTS4_RUNS=0 PORTS4_SMALL=1 "$sanitizer" --tool memcheck --report-api-errors no "$here/ports4_bench" "$twins"
echo "---- ratios (twin/Rust) per pass:" | tee -a "$summary"
for f in "$dest"/bench_*.log; do echo "$(basename "$f" .log): $(grep -E 'twin/Rust' "$f" | sed -E 's/ +Rust .*twin\/Rust/:/' | tr -s ' ' | tr '\n' ';')" | tee -a "$summary"; done
grep -hE "test result|FAILED|ERROR SUMMARY|panicked" "$dest"/tests.log "$dest"/bench_*.log "$dest"/memcheck.log 2>/dev/null | sort | uniq -c | tee -a "$summary"
echo "==== logs"
for f in tests bench_1 bench_2 memcheck; do echo "== $f"; tail -n 60 "$dest/$f.log" 2>/dev/null; done
