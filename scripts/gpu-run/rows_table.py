#!/usr/bin/env python3
"""Joins bench_rows's `pair`/`lib` lines with torch_rows.py's `torch` lines into one table:
op, shape, ours µs, twin µs, torch µs, ours vs twin (twin µs / ours µs: the issue asks >= 0.97)
and ours vs torch (torch µs / ours µs: >= 1.0). Usage: rows_table.py OURS.log TORCH.log."""
import sys


def lines(path, tag):
    for line in open(path, encoding="utf-8", errors="replace"):
        parts = line.rstrip("\n").split("\t")
        if parts[0] == tag:
            yield parts[1:]


def base(op):
    return op.split(" (")[0]


ours_log, torch_log = sys.argv[1], sys.argv[2]
torch_us = {}
for op, shape, us, *_ in lines(torch_log, "torch"):
    key = (base(op), shape)
    torch_us[key] = min(float(us), torch_us.get(key, float("inf")))
print(f"| op | shape | ours µs | twin µs | torch µs | vs twin (>= 0.97) | vs torch (>= 1.0) |")
print("|---|---|---|---|---|---|---|")
for kind in ("pair", "lib"):
    for parts in lines(ours_log, kind):
        op, shape, ours = parts[0], parts[1], float(parts[2])
        twin = float(parts[3]) if kind == "pair" else None
        t = torch_us.get((base(op), shape))
        fmt = lambda v: f"{v:.2f}" if v else "-"
        vs_twin = f"{twin / ours:.3f}{'' if twin / ours >= 0.97 else ' BELOW'}" if twin else "-"
        vs_torch = f"{t / ours:.3f}{'' if t / ours >= 1.0 else ' BELOW'}" if t else "-"
        print(f"| {op} | {shape} | {ours:.2f} | {fmt(twin)} | {fmt(t)} | {vs_twin} | {vs_torch} |")
