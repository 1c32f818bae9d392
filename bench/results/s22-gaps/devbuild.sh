#!/bin/bash
# usage: devbuild.sh <package> <tag> [extra llvm flags...]  -> /tmp/s22/<package>.<tag>.s/.cubin/.sass
set -e
pkg=$1; tag=$2; shift 2
TC=${TC:-/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/bin}
flags="-Ctarget-cpu=sm_90"$'\x1f'"-Aunused_features"$'\x1f'"-Cllvm-args=-nvptx-fma-level=1"$'\x1f'"-Cllvm-args=-unroll-threshold=400"$'\x1f'"-Cdebuginfo=line-tables-only"
for n in $(echo ${ARCHS:-70 72 75 80 86 87 89 90}); do flags="$flags"$'\x1f'"--cfg"$'\x1f'"ferrocuda_sm=\"$n\""; done
[ -n "$FAST" ] && flags="$flags"$'\x1f'"-Cllvm-args=-nvptx-prec-divf32=0"$'\x1f'"-Cllvm-args=-nvptx-prec-sqrtf32=0"$'\x1f'"--cfg"$'\x1f'"ferrocuda_fast_math"
for f in $RAW; do flags="$flags"$'\x1f'"$f"; done
for f in "$@"; do flags="$flags"$'\x1f'"-Cllvm-args=$f"; done
td=/tmp/s22/td-$tag
out=/tmp/s22/$pkg.$tag
cd ${WT:-/work/wt/gaps}
CARGO_PROFILE_RELEASE_PANIC=abort CARGO_PROFILE_RELEASE_LTO=fat CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=false RUSTC=$TC/rustc RUSTC_BOOTSTRAP=1 CARGO_ENCODED_RUSTFLAGS="$flags" $TC/cargo rustc -q -p $pkg --release --lib --crate-type cdylib --target nvptx64-nvidia-cuda -Zbuild-std=core --target-dir $td -- -Clinker=/bin/true --emit=asm=$out.s
/tmp/s22/ptxpost/target/release/ptxpost $out.s $out.ptx ${FAST:+fast}
ptxas -O3 -arch=sm_90 -v $out.ptx -o $out.cubin 2> $out.ptxas || { cat $out.ptxas; exit 1; }
nvdisasm -c $out.cubin > $out.sass
echo built $out
