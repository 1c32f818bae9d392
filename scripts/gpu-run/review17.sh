#!/usr/bin/env bash
# Held-out review of session 17 (audit/2026-11-28e/FINDINGS-review.md): the GPU repros of
# G17R-1 (a `GridSlices` kernel whose `cols(dst = (n, stride))` parameters the device build names
# in the other order) and G17R-4 (a `&TensorMap` parameter the device build resolves to a 4 KiB
# type of its own), in tests/host_device_layout.rs (kernels in tests/kernels/src/host_device_layout.rs),
# with the Q1/Q2 GPU test of that file. G17R-2, -3, -5 are compile-time and CPU findings.
#
# Stage on the build machine, from the repository root (a folder git ignores):
#   scripts/gpu-run/review17.sh stage .device-bin/review
# (builds `cargo test --release -p ferrocuda-main --test host_device_layout --no-run`)
# then on the GPU machine (a few seconds; carry the folder):
#   bash .device-bin/review/run-review17.sh
# Output in $OUT/review17.txt (or ./out/review17.txt). Expect "test result: ok. 3 passed" and:
#   G17R-1: the launch gave Err(KernelSignatureMismatch { .. }); elements written past the
#   one-element view: 0 of 1023
#   G17R-4: the launch gave Err(KernelSignatureMismatch { .. }); out[0] = 0x0
# (before the fixes: Ok(()) and 1023 of 1023; Ok(()) and a word read 4000 bytes past the map). The summary line at the end: PASS, or FAIL with the
# failed tests named. Staging and the run are scripts/gpu-run/test-repro.sh's.
set -euo pipefail
case "${1:-}" in
stage)
  dest=${2:?usage: review17.sh stage <dest>}
  exec "$(dirname "$0")/test-repro.sh" stage review17 ferrocuda-main host_device_layout 60 "$dest" gpu 'written past the one-element view: [0-9]+ of 1023'
  ;;
*)
  echo "usage: review17.sh stage <dest>; then, on the GPU machine, bash <dest>/run-review17.sh" >&2
  exit 2
  ;;
esac
