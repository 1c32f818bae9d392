#!/usr/bin/env python3
"""Reads hopper-gemm's JSON (scripts/gpu-run/gemm.sh) and prints, per size and per schedule of
the sm_90 GEMM, its steady / burst / sustained ratios to cuBLAS and the lowest of the three
(what kernels/src/gemm.rs's HOPPER_GEMM_TABLE records), then the schedule with the highest
lowest ratio per size. Usage: gemm_table.py hopper-gemm.json [fastcu.log]"""
import json
import re
import sys

rows = json.load(open(sys.argv[1]))
names = ["library", "plain", "bal", "g8-bal", "g16-bal", "cl2-bal", "cl2-g4-bal", "cl2-g8-bal"]
for row in rows:
    side = row["size"]
    cublas = {"steady": row.get("cublas_steady_tflops"), "burst": row.get("cuBLAS_burst_tflops"), "sustained": row.get("cuBLAS_sustained_tflops")}
    print(f"{side}^3  cuBLAS TFLOP/s: steady {cublas['steady']}, burst {cublas['burst']}, sustained {cublas['sustained']}")
    best = None
    for name in names:
        ratios = {}
        for mode in ("steady", "burst", "sustained"):
            ours = row.get(f"{name}_{mode}_tflops")
            if ours is not None and cublas[mode]:
                ratios[mode] = ours / cublas[mode]
        if not ratios:
            continue
        low = min(ratios.values())
        clocks = " ".join(f"{mode} {row.get(f'{name}_{mode}_clock', {}) or {}}" for mode in ("burst", "sustained"))
        print(f"  {name:12s} " + " ".join(f"{mode} {ratios[mode]:.3f}" for mode in ratios) + f"  lowest {low:.3f}   {clocks}")
        if name != "library" and (best is None or low > best[1]):
            best = (name, low)
    print(f"  best schedule: {best[0]} (lowest ratio {best[1]:.3f})")
if len(sys.argv) > 2:
    for line in open(sys.argv[2]):
        if re.search(r"TFLOP|check", line):
            print(line.rstrip())
