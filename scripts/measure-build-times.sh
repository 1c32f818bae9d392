#!/usr/bin/env bash
# Measures (a benchmark, not a test) how long building the kernel crate takes:
#   clean    - `cargo build --release -p gpu-kernels` after `cargo clean` (host crates,
#              the device build of `core` and the kernels, ptxas);
#   no-op    - the same command again, nothing changed;
#   one edit - after changing one kernel's source (reverted afterwards).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds() { local start end; start=$(date +%s.%N); "$@" >/dev/null 2>&1; end=$(date +%s.%N); echo "$end - $start" | bc; }
build() { cargo build --release -p gpu-kernels; }

cargo clean >/dev/null 2>&1
clean=$(seconds build)
noop=$(seconds build)
kernels=gpu-kernels/src/lib.rs
cp "$kernels" /tmp/ferrocuda-kernels.rs.bak
trap 'cp /tmp/ferrocuda-kernels.rs.bak "$kernels"' EXIT
sed -i 's/y\[i\] = a \* x\[i\] + y\[i\];/y[i] = a * x[i] + y[i] + 0.0;/' "$kernels"
grep -q '+ 0.0;' "$kernels" || { echo "the edit did not apply" >&2; exit 1; }
edit=$(seconds build)
echo "machine: $(nproc) cores; $(cargo --version); device: $(/usr/bin/rustc --version 2>/dev/null || echo '?')"
printf 'clean build of gpu-kernels: %6.1f s\nno-op rebuild:              %6.1f s\nrebuild after one edit:     %6.1f s\n' "$clean" "$noop" "$edit"
