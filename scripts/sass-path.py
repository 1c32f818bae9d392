#!/usr/bin/env python3
"""Instructions one thread runs on one path through a kernel's SASS (no GPU): a rough dynamic
count, where `scripts/rows-sass.py` counts every path of the kernel at once.

    scripts/sass-path.py CUBIN KERNEL [TAKE] [-v]

Walks from the entry: an unconditional branch is followed, a conditional one falls through
unless its target label is in TAKE (comma-separated: `.L_x_4` always, `.L_x_67*2` the first 2
times: a loop's back edge for its trip count); `BRA.DIV` falls through (a converged warp); the
walk ends at an unconditional `EXIT`, or at a predicated `EXIT`/branch right after a 16-byte
store under the same predicate (the 16-byte path's end). `-v` prints each branch met and what
the walk did (`fall` lines show the instruction before it), to choose TAKE by reading the SASS
(`nvdisasm -c CUBIN`). A cubin of one entry: `ptxas -arch=sm_90 -O3 -e KERNEL PTX -o CUBIN`.
Used for docs/kernels/rows.md, "Session 14 (2)".
"""
import re
import subprocess
import sys

args = [a for a in sys.argv[1:] if a != "-v"]
if len(args) < 2:
    sys.exit(__doc__)
cub, name = args[0], args[1]
take = {}
for t in args[2].split(",") if len(args) > 2 and args[2] else []:
    label, _, k = t.partition("*")
    take[label] = int(k) if k else 10**9
text = subprocess.run(["nvdisasm", "-c", cub], capture_output=True, text=True, check=True).stdout
ins, labels, inside = [], {}, False
for line in text.splitlines():
    if re.match(r"\s*\.text\.(\w+):", line):
        inside = line.strip().startswith(f".text.{name}:")
        continue
    if not inside:
        continue
    m = re.match(r"(\.L_x_\d+):", line.strip())
    if m:
        labels[m.group(1)] = len(ins)
        continue
    m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(.*?)\s*;", line)
    if m:
        ins.append(m.group(1))
if not ins:
    sys.exit(f"sass-path: no kernel {name} in {cub}")


def after_store(pc, pred):
    """A predicated instruction right after a 16-byte store under the same predicate."""
    if pc == 0:
        return False
    prev = ins[pc - 1].split()
    return len(prev) > 1 and prev[1].startswith("STG") and ".128" in prev[1] and prev[0] == pred


pc, count, steps, branches, ops = 0, 0, 0, [], {}
while pc < len(ins) and steps < 20000:
    i = ins[pc]
    steps += 1
    words = i.split()
    pred = words[0] if words[0].startswith("@") else None
    op = words[1] if pred else words[0]
    if op != "NOP":
        count += 1
        ops[op.split(".")[0]] = ops.get(op.split(".")[0], 0) + 1
    if op == "EXIT" and (pred is None or after_store(pc, pred)):
        break
    if op.startswith("BRA") and op != "BRA.DIV":
        target = re.search(r"\((\.L_x_\d+)\)", i).group(1)
        ends = pred is not None and after_store(pc, pred)
        if pred is None or take.get(target, 0) > 0 or ends:
            if pred and not ends:
                take[target] -= 1
            branches.append(f"{pc}:{'take' if pred else 'jump'}{target[4:]}")
            pc = labels[target]
            continue
        branches.append(f"{pc}:fall{target[4:]}[{ins[pc - 1][:60]}]")
    pc += 1
else:
    print(f"sass-path: stopped after {steps} steps (a loop taken without a count?)")
shown = " ".join(f"{k}={v}" for k, v in sorted(ops.items()) if k in ("BAR", "SHFL", "S2R", "LDS", "STS", "LDG", "STG", "MUFU"))
print(f"{name}: {count} instructions on the path; {shown}")
if "-v" in sys.argv:
    print("branches:", " ".join(branches))
