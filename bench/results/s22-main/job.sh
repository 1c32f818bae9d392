#!/bin/bash
set -u
here=$(cd "$(dirname "$0")" && pwd)
O=${OUT:-/tmp/main22}; mkdir -p "$O/main22"
w=$(mktemp -d); tar xJf "$here/bins.tar.xz" -C "$w"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "commit $(cat $here/commit.txt)"
( cd "$here/p9" && PORTS9_ONLY=V2,L3,L5 OUT="$O/main22" timeout 40 bash gpu-job.sh > "$O/main22/p9.txt" 2>&1; echo "p9 rc=$?" )
grep -E "poly_norm|layernorm_backward|encoder_backward" "$O/main22/p9.txt" | head -20
t() { local n=$1 l=$2; shift 2; REQUIRE_GPU=1 timeout -k 2 $l "$w/$n" "$@" --test-threads=1 > "$O/main22/$n.txt" 2>&1; echo "$n rc=$? $(grep -o 'test result: .*passed' "$O/main22/$n.txt" | tail -1)"; }
t audit_g22r 12
t gpu_fault 12
t gpu_s22 12
t gpu_contexts 15
t gpu_s21_current 12
t ports10 12
t gpu_kernels_lib 40 s22_d256
t gpu_kernels_lib 60 attention
cd "$O" && tar cJf main22.tar.xz main22 && rm -rf main22
