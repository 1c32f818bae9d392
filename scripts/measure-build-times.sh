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
# A directory cargo creates itself, so that it holds cargo's CACHEDIR.TAG (where the builder
# puts the shared device build, target/ferrocuda-device).
scratch=${FERROCUDA_MEASURE_DIR:-$(mktemp -d /tmp/ferrocuda-measure.XXXXXX)}
mkdir -p "$scratch"
target=$scratch/target
rm -rf "$target"
export CARGO_TARGET_DIR=$target
kernels=gpu-kernels/src/lib.rs
cp "$kernels" "$scratch/kernels.rs.bak"
trap 'cp "$scratch/kernels.rs.bak" "$kernels"; [ -n "${FERROCUDA_MEASURE_DIR:-}" ] || rm -rf "$scratch"' EXIT

measure() {   # prints "<wall> <cpu>" in seconds for one build
  local start end before after stat
  # cutime + cstime of this shell (fields 16 and 17), read without starting a subshell.
  read -ra stat </proc/$BASHPID/stat
  before=$((stat[15] + stat[16]))
  start=$(date +%s.%N)
  cargo build --release --lib -q >/dev/null 2>"$scratch/last.log" || { cat "$scratch/last.log" >&2; exit 1; }
  end=$(date +%s.%N)
  read -ra stat </proc/$BASHPID/stat
  after=$((stat[15] + stat[16]))
  awk -v s="$start" -v e="$end" -v b="$before" -v a="$after" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%6.1f s wall %6.1f s CPU", e - s, (a - b) / hz }'
}
clean=$(measure)
[ -d "$target/ferrocuda-device" ] || { echo "no $target/ferrocuda-device: the device build went elsewhere" >&2; exit 1; }
rm -rf "$target/ferrocuda-device"; touch "$kernels"
device=$(measure)
noop=$(measure)
echo "// an edit $(date +%s%N)" >>"$kernels"
edit=$(measure)
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); $(cargo --version)"
echo "device toolchain: $(grep -o 'TOOLCHAIN: &str = "[^"]*"' "$target"/release/build/ferrocuda-main-*/out/ferrocuda_artifacts.rs | head -1 | cut -d'"' -f2)"
printf 'clean build of the example kernels: %s\ndevice build only (core + kernels): %s\nno-op rebuild:                      %s\nrebuild after one edit:             %s\n' "$clean" "$device" "$noop" "$edit"
