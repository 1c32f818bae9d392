#!/bin/bash
# Session 22, helper fixshared: G22R-1's fix on the GPU (audit/2026-11-29b). At most ~25 s.
#   bash .device-bin/fixshared/job.sh      (from /work/main)
# Writes $OUT/fixshared/results.txt. Runs, with REQUIRE_GPU=1:
#  - audit_g22r (tests/audit_g22r.rs): the panic report names the kernel from the module's
#    names table (g22r_1_the_gpu_panic_report_names_the_kernel_from_the_names_table), and the
#    review's `gpu-tag` shape (the tag rewritten with (secret, secret ^ key) by a shared store
#    past a 16-byte array) reports an empty kernel name, never the secret buffer's bytes
#    (g22r_1_a_forged_kernel_tag_reports_no_foreign_bytes; its child prints "CHILD TAG" and
#    "CHILD CHECKED forged=true");
#  - gpu_fault (tests/gpu_fault.rs): the existing panic-report tests (kernel names of other
#    kernels through the same table).
# Each line "PASS"/"FAIL" per binary at the end. The review's own repro crates no longer
# compile (the shadowing is a type error now), so there is no g22r1-host to rerun.
set -u
export REQUIRE_GPU=1
here=$(cd "$(dirname "$0")" && pwd)
O=${OUT:-/tmp/fixshared-out}/fixshared; mkdir -p "$O"
LOG="$O/results.txt"
nvidia-smi -L > "$LOG" 2>&1
bin=$(mktemp -d)
status=""
for t in audit_g22r gpu_fault; do
  xz -dc "$here/$t.xz" > "$bin/$t"; chmod +x "$bin/$t"
  echo "== $t" >> "$LOG"
  timeout 11 "$bin/$t" --nocapture --test-threads=1 >> "$LOG" 2>&1
  rc=$?
  echo "rc=$rc" >> "$LOG"
  if [ $rc -eq 0 ]; then status="$status $t PASS"; else status="$status $t FAIL(rc=$rc)"; fi
done
echo "SUMMARY:$status" >> "$LOG"
grep -E "CHILD TAG|CHILD CHECKED|test result|SKIPPED|panicked" "$LOG"
echo "SUMMARY:$status"
