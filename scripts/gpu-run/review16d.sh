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
set -euo pipefail
case "${1:-}" in
stage)
  root=$(cd "$(dirname "$0")/../.." && pwd)
  dest=${2:?usage: review16d.sh stage <dest>}
  cd "$root"
  mkdir -p "$dest"
  exe=$(cargo test --release -p ferrocuda-main --test optional_inputs --no-run --message-format=json 2>/dev/null |
    python3 scripts/gpu-run/cargo-executable.py optional_inputs)
  [ -n "$exe" ] || { echo "no optional_inputs executable built" >&2; exit 1; }
  cp "$exe" "$dest/optional_inputs"
  (cd "$dest" && xz -T0 -6 -f optional_inputs)
  cp "$0" "$dest/run-review16d.sh"
  echo "staged $dest/optional_inputs.xz and $dest/run-review16d.sh"
  ;;
*)
  here=$(cd "$(dirname "$0")" && pwd)
  out=${OUT:-$here/out}
  mkdir -p "$out"
  log="$out/review16d.txt"
  bin=$here/optional_inputs
  [ -x "$bin" ] || { xz -dkc "$here/optional_inputs.xz" > "$bin" && chmod +x "$bin"; }
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$log" 2>&1 || true
  set +e
  REQUIRE_GPU=1 RUST_BACKTRACE=0 timeout -k 2 60 "$bin" gpu:: --nocapture --test-threads=1 >> "$log" 2>&1
  rc=$?
  set -e
  cat "$log"
  failed=$(sed -n '/^failures:$/,/^test result/p' "$log" | grep -E '^    gpu::' | tr -d ' ' | tr '\n' ' ' || true)
  if [ $rc -eq 0 ] && ! grep -q '^SKIPPED' "$log"; then echo "review16d PASS"; else echo "review16d FAIL (exit $rc; failed: ${failed:-?})"; fi
  exit $rc
  ;;
esac
