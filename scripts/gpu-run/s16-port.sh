#!/usr/bin/env bash
# Session 16's port work on a GPU (files staged by `scripts/gpu-run/stage-s16-port.sh DEST`):
# with REQUIRE_GPU=1, the optional-input tests (tests/optional_inputs.rs: `Option<&[T]>` given
# and `None`, GPU and CPU executor) and the partition tests (tests/out_partitions.rs: Cells3d's
# and GridSlices' launch-time bounds refused on the GPU too), ferrocuda-bench's `partitions`
# case (`unpermute_3d`, Cells3d, beside its CUDA twin), then bench/ports5's harness (every port
# beside its nvcc twin; copy_and_cast's "fixed" column is GridSlices; the top-k's two new
# `finished` rows: `None` beside `nullptr`, flags beside flags). Everything it prints also goes to $OUT/s16-port.txt (or DEST/out/s16-port.txt).
# About 60 s (under 120 s). Ends with "s16-port: PASS" or "s16-port: FAIL (...)".
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
  for t in optional_inputs out_partitions ferrocuda-bench; do
    xz -dc "$here/$t.xz" > "$here/$t" && chmod +x "$here/$t"
  done
  timeout 30 "$here/optional_inputs" --test-threads 1 || failed="$failed optional_inputs"
  timeout 60 "$here/out_partitions" --test-threads 1 || failed="$failed out_partitions"
  # unpermute_3d (Cells3d) beside its CUDA twin (NVRTC), with the other partition kernels.
  (cd "$out" && timeout 40 "$here/ferrocuda-bench" --only partitions --runs 30 --json "$out/partitions.json") || failed="$failed ferrocuda-bench"
  OUT="$out" timeout 110 bash "$here/ports5/ports5.sh" > /dev/null
  rc=$?
  cat "$out/ports5.txt"
  [ "$rc" = 0 ] || failed="$failed ports5(rc=$rc)"
  if [ -z "$failed" ]; then echo "s16-port: PASS"; else echo "s16-port: FAIL ($failed )"; fi
  [ -z "$failed" ]
} 2>&1 | tee "$log"
exit "${PIPESTATUS[0]}"
