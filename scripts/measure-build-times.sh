#!/usr/bin/env bash
# Measures (a benchmark, not a test) how long building the example kernel crate takes, in a
# target directory of its own (your target/ is left alone):
#   clean        - `cargo build --release --lib` of the root package (the example kernels)
#                  from an empty target directory: host crates, the device build of `core`
#                  and the kernels, ptxas;
#   device clean - the same after removing only the device build (`target/ferrocuda-device`);
#   no-op        - the same command again, nothing changed;
#   one edit     - after changing one kernel source file (reverted afterwards).
# Prints wall time and CPU time (user+sys of cargo and everything it ran). On a machine that
# others are using, wall time is the less reliable of the two.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${FERROCUDA_MEASURE_TARGET:-$(mktemp -d /tmp/ferrocuda-measure.XXXXXX)}
export CARGO_TARGET_DIR=$target
kernels=gpu-kernels/src/lib.rs
cp "$kernels" "$target/kernels.rs.bak"
trap 'cp "$target/kernels.rs.bak" "$kernels"; [ -n "${FERROCUDA_MEASURE_TARGET:-}" ] || rm -rf "$target"' EXIT

measure() {   # prints "<wall> <cpu>" in seconds for one build
  local start end before after
  before=$(awk '{print $16 + $17}' /proc/$BASHPID/stat)
  start=$(date +%s.%N)
  cargo build --release --lib -q >/dev/null 2>"$target/last.log" || { cat "$target/last.log" >&2; exit 1; }
  end=$(date +%s.%N)
  after=$(awk '{print $16 + $17}' /proc/$BASHPID/stat)
  awk -v s="$start" -v e="$end" -v b="$before" -v a="$after" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%6.1f s wall %6.1f s CPU", e - s, (a - b) / hz }'
}
clean=$(measure)
rm -rf "$target/ferrocuda-device"; touch "$kernels"
device=$(measure)
noop=$(measure)
echo "// an edit $(date +%s%N)" >>"$kernels"
edit=$(measure)
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); $(cargo --version)"
echo "device toolchain: $(grep -o 'TOOLCHAIN: &str = "[^"]*"' "$target"/release/build/ferrocuda-main-*/out/ferrocuda_artifacts.rs | head -1 | cut -d'"' -f2)"
printf 'clean build of the example kernels: %s\ndevice build only (core + kernels): %s\nno-op rebuild:                      %s\nrebuild after one edit:             %s\n' "$clean" "$device" "$noop" "$edit"
