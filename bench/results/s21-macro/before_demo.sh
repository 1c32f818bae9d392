#!/bin/bash
# Builds the session-21 attack crates against HEAD's (session 20's) device crate and macro, the
# way ferrocuda-builder's inner build does, and prints the entry of each.
set -u
W=/work/wt/macro; H=/tmp/macro-head; OUTD=/tmp/macro-before-demo; mkdir -p $OUTD
extract() { python3 - "$1" "$2" <<'PY'
import re,sys
src=open(sys.argv[1]).read()
m=re.search(r'const '+sys.argv[2]+r': &str = r#"(.*?)"#;', src, re.S)
print(m.group(1), end='')
PY
}
for case in ${CASES:-RENAMED_CORE:core RENAMED_DEVICE_SLICE_ELEMENTS:slices RENAMED_LAUNCH_BOUNDS:bounds}; do
  const=${case%%:*}; name=${case##*:}
  d=$OUTD/$name; rm -rf $d; mkdir -p $d/src
  if [ $name = core ]; then dep="ferrocuda-device = { path = \"$H/device\" }"; else dep="real_device = { package = \"ferrocuda-device\", path = \"$H/device\" }"; fi
  printf '[package]\nname = "s21-before-%s"\nversion = "0.0.0"\nedition = "2024"\n[lib]\ncrate-type = ["rlib"]\n[dependencies]\n%s\nbytemuck = { version = "1", features = ["derive"] }\n[workspace]\n' $name "$dep" > $d/Cargo.toml
  extract $W/tests/macro_seams_build.rs $const > $d/src/lib.rs
  cp $W/Cargo.lock $d/
  (cd $d && env RUSTC_BOOTSTRAP=1 CARGO_ENCODED_RUSTFLAGS="$(printf -- '-Ctarget-cpu=sm_90\x1f-Aunused_features\x1f--cfg\x1fferrocuda_sm="70"\x1f--cfg\x1fferrocuda_sm="72"\x1f--cfg\x1fferrocuda_sm="75"\x1f--cfg\x1fferrocuda_sm="80"\x1f--cfg\x1fferrocuda_sm="86"\x1f--cfg\x1fferrocuda_sm="87"\x1f--cfg\x1fferrocuda_sm="89"\x1f--cfg\x1fferrocuda_sm="90"')" \
     CARGO_PROFILE_RELEASE_PANIC=abort CARGO_PROFILE_RELEASE_LTO=fat CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 \
     cargo rustc --lib --crate-type cdylib --target nvptx64-nvidia-cuda -Zbuild-std=core --manifest-path $d/Cargo.toml --target-dir /tmp/macro-before-demo-target --release -- -Clinker=/bin/true --emit=asm=$d/out.ptx > $d/build.log 2>&1; echo "$name: exit $?")
done
