#!/usr/bin/env python3
# registers/spills of every kernel of every device crate's newest PTX under target/release/build
import glob, os, re, subprocess, sys, tempfile, collections
root = sys.argv[1]; out = sys.argv[2]
newest = {}
for f in glob.glob(f"{root}/target/release/build/*/out/*.ptx"):
    k = os.path.basename(f)
    if k not in newest or os.path.getmtime(f) > os.path.getmtime(newest[k]): newest[k] = f
rows = []
for k, f in sorted(newest.items()):
    arch = k.rsplit(".", 2)[1]
    log = subprocess.run(["ptxas", f"-arch={arch}", "-O3", "-v", f, "-o", "/dev/null"], capture_output=True, text=True).stderr
    cur = None; st = sp = 0
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m: cur = m.group(1); st = sp = 0
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores", line)
        if m: st, sp = int(m.group(1)), int(m.group(2))
        m = re.search(r"Used (\d+) registers", line)
        if m and cur: rows.append(f"{k}\t{cur}\t{m.group(1)}\t{st}\t{sp}"); cur = None
open(out, "w").write("\n".join(rows) + "\n")
print(len(rows), "kernels in", len(newest), "PTX files")
