#!/usr/bin/env python3
"""SASS of each port beside its twin (bench/ports7): instructions per kernel (NOPs left out)
and the counts of the opcodes that decide a memory-bound kernel's speed. No GPU needed.

usage: sass.py OURS.cubin TWIN.cubin port_name=twin_symbol ...
"""
import collections, re, subprocess, sys

KEYS = ["LDG", "STG", "LDS", "STS", "BAR", "SHFL", "MUFU", "ATOM", "RED", "BRA", "CALL", "F2F", "F2FP", "I2F", "F2I", "DFMA", "DMUL", "FFMA", "HFMA2", "HMUL2", "HADD2", "IMAD", "LDL", "STL", "MEMBAR"]

def functions(cubin):
    text = subprocess.run(["nvdisasm", "-c", cubin], capture_output=True, text=True, check=True).stdout
    funcs, name = {}, None
    for line in text.splitlines():
        m = re.match(r"\s*\.text\.(\S+):", line)
        if m:
            name = m.group(1)
            funcs[name] = []
            continue
        m = re.search(r"/\*[0-9a-f]{4,}\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
        if m and name:
            op = m.group(2)
            if op != "NOP":
                funcs[name].append(op)
    return funcs

def summary(ops):
    c = collections.Counter()
    for op in ops:
        base = op.split(".")[0]
        c[base] += 1
        if op.startswith("LDG") or op.startswith("STG"):
            c[op] += 1
    return c

ours, twin = functions(sys.argv[1]), functions(sys.argv[2])
for pair in sys.argv[3:]:
    a, b = pair.split("=")
    oa, ob = ours.get(a, []), twin.get(b, [])
    sa, sb = summary(oa), summary(ob)
    print(f"{a}: ours {len(oa)} instructions, twin {len(ob)}")
    for k in KEYS:
        if sa[k] or sb[k]:
            print(f"  {k:<7} {sa[k]:>4} {sb[k]:>4}")
    wide = sorted({k for k in list(sa) + list(sb) if k.startswith(("LDG.", "STG."))})
    for k in wide:
        print(f"  {k:<28} {sa[k]:>4} {sb[k]:>4}")
