#!/bin/bash
# Builds fixctx's final GPU job from this checkout and stages it into /work/main/.device-bin/fixctx/
# (DEST to change): the test binaries (host: gpu_g23s_2, gpu_s23_sound, gpu_s22; ferrocuda-main:
# gpu_contexts, gpu_g20r, g22s_2; collectives: gpu_s21_current) and review2's repros g23s_2, g23s_3 (audit/2026-11-29e, each
# copied in as an example for the build, then removed), xz-compressed, with job.sh.
# Run from the checkout's root.
set -e
dest=${DEST:-/work/main/.device-bin/fixctx}
rm -f "$dest/READY"
rm -rf "$dest/bin"
mkdir -p "$dest/bin"
exe() { # package test
  cargo test --release -p "$1" --test "$2" --no-run --message-format=json 2>/dev/null | python3 scripts/gpu-run/cargo-executable.py "$2"
}
for t in gpu_g23s_2 gpu_s23_sound gpu_s22; do cp "$(exe ferrocuda-host $t)" "$dest/bin/$t"; done
for t in gpu_contexts gpu_g20r g22s_2; do cp "$(exe ferrocuda-main $t)" "$dest/bin/$t"; done
cp "$(exe ferrocuda-collectives gpu_s21_current)" "$dest/bin/gpu_s21_current"
example() { # id package examples-dir
  local name; name=$(echo "$1" | tr 'A-Z-' 'a-z_')
  cp "audit/2026-11-29e/$1/$name.rs" "$3/$name.rs"
  cargo build --release -p "$2" --example "$name" || { rm -f "$3/$name.rs"; exit 1; }
  rm -f "$3/$name.rs"
  cp "target/release/examples/$name" "$dest/bin/$name"
}
mkdir -p host/examples
example G23S-2 ferrocuda-host host/examples
rmdir host/examples 2>/dev/null || true
example G23S-3 ferrocuda-main examples
(cd "$dest/bin" && xz -T0 -6 -f ./*)
cp bench/results/s23-fixctx/job.sh "$dest/job.sh"
echo "staged from $(git rev-parse --short HEAD): $(ls "$dest/bin" | tr '\n' ' ')"; du -sh "$dest"
