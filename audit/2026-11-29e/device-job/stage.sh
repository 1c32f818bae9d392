#!/bin/bash
# Builds review2's repros from this checkout (each copied in as an example of the package it
# needs, then removed again) and stages them with job.sh into /work/main/.device-bin/review2/.
# Run from the checkout's root. G23S-2 takes ~30 s (host crate), G23S-3 up to 10 min (the
# workspace's test kernels) on the shared 2-core machine.
set -e
dest=${DEST:-/work/main/.device-bin/review2}
rm -f "$dest/READY"
mkdir -p "$dest/bin"
build() { # id package examples-dir
  local name; name=$(echo "$1" | tr 'A-Z-' 'a-z_')
  cp "audit/2026-11-29e/$1/$name.rs" "$3/$name.rs"
  cargo build --release -p "$2" --example "$name" || { rm -f "$3/$name.rs"; exit 1; }
  rm -f "$3/$name.rs"
  cp "target/release/examples/$name" "$dest/bin/$name"
}
mkdir -p host/examples
build G23S-2 ferrocuda-host host/examples
rmdir host/examples 2>/dev/null || true
build G23S-3 ferrocuda-main examples
cp audit/2026-11-29e/device-job/job.sh "$dest/job.sh"
echo "staged: $(ls "$dest/bin")"
