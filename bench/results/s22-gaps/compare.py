#!/usr/bin/env python3
"""Side by side: twin/ours with the builder's default flags (base) and with runtime_unroll(4)
(ru4), per kernel, from the job's outputs (session 22, helper gaps)."""
import re, sys, os
R = sys.argv[1]

def rows(path):
    out = {}
    if not os.path.exists(path):
        return out
    for line in open(path):
        f = line.rstrip('\n').split('\t')
        if f[0] == 'pair' and len(f) >= 5:
            try:
                out[f"{f[1]} {f[2]}"] = float(f[4]) / float(f[3])
            except (ValueError, ZeroDivisionError):
                pass
    return out

def ports(path):
    out = {}
    if not os.path.exists(path):
        return out
    last = ''
    for line in open(path):
        m = re.match(r'^(\s*)(.+?)\s+(\S.*?)?\s+(\d+\.\d+)\s+(\d+\.\d+)\s+(\d+\.\d+)\s+\S', line)
        if not m:
            continue
        nums = re.search(r'\s+\d+\.\d+\s+\d+\.\d+\s+\d+\.\d+\s', line)
        name = ' '.join(line[:nums.start()].split())
        out[name] = float(m.group(6))
    return out

for kind, parse, second in (("rows", rows, "ru4"), ("ports9", ports, "ru4")):
    a, b = parse(f"{R}/{kind}-base.txt"), parse(f"{R}/{kind}-{second}.txt")
    print(f"\n{kind}: twin/ours  base  {second}  {second}/base")
    for k in list(a) + [k for k in b if k not in a]:
        x, y = a.get(k), b.get(k)
        ratio = f"{y / x:.3f}" if x and y else "-"
        flag = "  <<" if x and y and y / x < 0.98 else ("  >>" if x and y and y / x > 1.02 else "")
        fx = f"{x:.3f}" if x is not None else "-"
        fy = f"{y:.3f}" if y is not None else "-"
        print(f"  {k[:70]:70} {fx:>6} {fy:>6} {ratio}{flag}")
