#!/usr/bin/env bash
# SASS counts (instructions without NOPs, LDG, and the trip-count division's I2F/MUFU.RCP/IMAD.HI)
# of each probe kernel in strided-loops.cu, as nvcc 13.0 builds it for sm_90. No GPU needed.
# usage: bench/results/s23-gaps2/strided-unroll.sh ["-O3 --use_fast_math"]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
nvcc=${NVCC:-$(command -v nvcc || echo /root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/nvidia/cu13/bin/nvcc)}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# shellcheck disable=SC2086
"$nvcc" ${1:--O3} -arch=sm_90 -cubin "$here/strided-loops.cu" -o "$tmp/p.cubin"
nvdisasm -c "$tmp/p.cubin" > "$tmp/p.sass"
python3 - "$tmp/p.sass" <<'PY'
import re, sys
cur, c = None, {}
for l in open(sys.argv[1]):
    m = re.match(r'\s*\.text\.(\w+):', l)
    if m:
        cur = m.group(1); c[cur] = [0, 0, 0]; continue
    if cur and re.search(r'/\*[0-9a-f]{4}\*/', l) and 'NOP' not in l:
        c[cur][0] += 1
        c[cur][1] += 'LDG' in l
        c[cur][2] += any(k in l for k in ('I2F', 'MUFU.RCP', 'IMAD.HI'))
for k, v in sorted(c.items()):
    print(f'{k:24} instr {v[0]:4}  LDG {v[1]:3}  div {v[2]}')
PY
