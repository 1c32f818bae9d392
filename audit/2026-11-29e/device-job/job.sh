#!/bin/bash
# review2's final-call job (audit 2026-11-29e): runs each staged repro binary with a time
# limit, prints its lines, and leaves everything in $OUT/review2.tar (one file).
# Run from /work/main: bash .device-bin/review2/job.sh   (about 5 s; at most 25 s)
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/review2-out}/review2
mkdir -p "$out"
export REQUIRE_GPU=1
nvidia-smi -L > "$out/gpu.txt" 2>&1
for bin in "$here"/bin/*; do
  name=$(basename "$bin")
  chmod +x "$bin"
  timeout "$([ "$name" = g23s_3 ] && echo 17 || echo 6)" "$bin" > "$out/$name.txt" 2>&1
  echo "rc=$?" >> "$out/$name.txt"
  cat "$out/$name.txt"
done
tar -C "$(dirname "$out")" -cf "$(dirname "$out")/review2.tar" review2 && rm -rf "$out"
