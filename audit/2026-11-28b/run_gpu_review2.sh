#!/usr/bin/env bash
# G14R-1 GPU repros (audit/2026-11-28b/FINDINGS-review2.md), host crate only, ~2 s.
# From the repository root: bash .device-bin/s14-review2/run.sh  (carry .device-bin/s14-review2)
# Expected: BEFORE: both tests FAIL ("the other thread's wait ... Ok(())" / "after its refused wait,
# the other thread's work on the joined stream was accepted"); AFTER: 2 passed.
D=$(dirname "$0"); OUT=${OUT:-/tmp}
for b in before after; do
  echo "== $b ==";
  REQUIRE_GPU=1 "$D/gpu_g14r_$b" --nocapture --test-threads=1 2>&1
done | tee "$OUT/g14r.txt"
