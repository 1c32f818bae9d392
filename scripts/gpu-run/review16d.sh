#!/usr/bin/env bash
# Held-out review 2 of session 16 (audit/2026-11-28d/FINDINGS-review2.md): the GPU half of the
# optional-input attack A1 and the optional-input tests it sits beside (tests/optional_inputs.rs,
# package ferrocuda-main; the kernels are test_kernels' embedded PTX).
#
# Stage on the build machine, from the repository root (a folder git ignores):
#   scripts/gpu-run/review16d.sh stage .device-bin/s16-review2
# (builds `cargo test --release -p ferrocuda-main --test optional_inputs --no-run`)
# then on the GPU machine (about 2 s on an H100/H200; carry the folder):
#   bash .device-bin/s16-review2/run-review16d.sh
# Output in $OUT/review16d.txt (or ./out/review16d.txt). Expect "test result: ok. 4 passed"
# (gpu::g16d_a1_an_empty_optional_input_is_some_on_both_backends and the three p30_ GPU tests)
# and no "SKIPPED" line. The summary line at the end: PASS, or FAIL with the failed tests named.
# Staging and the run are scripts/gpu-run/test-repro.sh's (the staged run-review16d.sh is a copy of it).
set -euo pipefail
case "${1:-}" in
stage)
  dest=${2:?usage: review16d.sh stage <dest>}
  exec "$(dirname "$0")/test-repro.sh" stage review16d ferrocuda-main optional_inputs 60 "$dest" 'gpu::'
  ;;
*)
  echo "usage: review16d.sh stage <dest>; then, on the GPU machine, bash <dest>/run-review16d.sh" >&2
  exit 2
  ;;
esac
