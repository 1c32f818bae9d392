#!/usr/bin/env bash
# Session 16's port work on a GPU (files staged by `scripts/gpu-run/stage-s16-port.sh DEST`):
# the optional-input tests (tests/optional_inputs.rs: `Option<&[T]>` given and `None`, on the
# GPU and the CPU executor) with REQUIRE_GPU=1, then bench/ports5's harness (every port beside
# its nvcc twin, with the top-k's two new `finished` rows: `None` beside `nullptr`, flags beside
# flags). Everything it prints also goes to $OUT/s16-port.txt (or DEST/out/s16-port.txt).
# About 40 s (under 120 s). Ends with "s16-port: PASS" or "s16-port: FAIL (...)".
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/out}
mkdir -p "$out"
log="$out/s16-port.txt"
export REQUIRE_GPU=1 RUST_BACKTRACE=1
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
{
  echo "commit: $(cat "$here/commit.txt" 2>/dev/null)"
  failed=""
  xz -dc "$here/optional_inputs.xz" > "$here/optional_inputs" && chmod +x "$here/optional_inputs"
  timeout 60 "$here/optional_inputs" --test-threads 1 || failed="$failed optional_inputs"
  OUT="$out" timeout 110 bash "$here/ports5/ports5.sh" > /dev/null
  rc=$?
  cat "$out/ports5.txt"
  [ "$rc" = 0 ] || failed="$failed ports5(rc=$rc)"
  if [ -z "$failed" ]; then echo "s16-port: PASS"; else echo "s16-port: FAIL ($failed )"; fi
  [ -z "$failed" ]
} 2>&1 | tee "$log"
exit "${PIPESTATUS[0]}"
