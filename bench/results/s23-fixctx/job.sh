#!/bin/bash
# fixctx's final-call job (session 23: G23S-2, G23S-3 on branch s23-fixctx). Run from /work/main:
#   bash .device-bin/fixctx/job.sh
# Unpacks the staged test binaries and review2's repros (bin/*.xz), runs each with REQUIRE_GPU=1
# under a time limit, prints a summary line per binary ("<name> PASS|FAIL rc=N" and, for the
# repros, their `G23S-*` lines), and leaves everything in $OUT/fixctx.tar (one file).
# About 15 s; at most 40 s (the limits below add up to 40).
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/fixctx-out}/fixctx
run_dir=$(mktemp -d)
mkdir -p "$out"
export REQUIRE_GPU=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/gpu.txt" 2>&1
cat "$out/gpu.txt"
for f in "$here"/bin/*.xz; do
  name=$(basename "$f" .xz)
  xz -dkc "$f" > "$run_dir/$name" && chmod +x "$run_dir/$name"
done
# name limit args...
run() {
  local name=$1 limit=$2; shift 2
  (timeout "$limit" "$run_dir/$name" "$@") > "$out/$name.txt" 2>&1
  local rc=$?
  echo "rc=$rc" >> "$out/$name.txt"
  local failed; failed=$(grep -E "^test .* FAILED$|SKIPPED|panicked" "$out/$name.txt" | head -5 | tr '\n' ';')
  if [ "$rc" = 0 ] && [ -z "$failed" ]; then echo "$name PASS"; else echo "$name FAIL rc=$rc $failed"; fi
}
T="--nocapture --test-threads=1"
run gpu_g23s_2 4 $T
run gpu_s23_sound 4 $T
run gpu_s22 3 $T
run gpu_contexts 6 $T
run gpu_g20r 3 $T
run g22s_2 4 $T
run gpu_s21_current 5 $T
# review2's repros rebuilt on this branch: G23S-2's cases a, b, c are now refused
# (`G23S-2: error: ... BindInsideGuard`) or held; G23S-3 prints `held` (the teardown waited).
run g23s_2 3
grep "G23S" "$out/g23s_2.txt"
run g23s_3 8
grep "G23S-3" "$out/g23s_3.txt" | grep -E "held|UNSOUND|left to the end"
tar -C "$(dirname "$out")" -cf "$(dirname "$out")/fixctx.tar" fixctx && rm -rf "$out"
rm -rf "$run_dir"
