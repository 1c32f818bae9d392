#!/usr/bin/env python3
"""Registers, stack frame, spill stores, SASS instructions and LDL/STL count of every kernel of
the crates below (the newest PTX of each in target/release/build/<crate>-*/out), ptxas 13 and
nvdisasm, no GPU; written as TSV to OUT. Build the crates first (release).

  scripts/kernel-stats.py OUT.tsv

Two runs (before/after a change) compared give bench/results/s13-fix30/kernel-stats-before-after.md.
"""
import glob, os, re, subprocess, sys, tempfile
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRATES = [("ports", "sm_90"), ("ports2", "sm_90"), ("ports2_llmc", "sm_90"), ("ferrocuda_ports3", "sm_90"), ("ferrocuda_ports3_llmc", "sm_90"),
          ("ferrocuda_kernels_device", "sm_90"), ("gpt2_kernels", "sm_80")]
out_path = sys.argv[1]
rows = []
for c, arch in CRATES:
    files = glob.glob(f"{ROOT}/target/release/build/*/out/{c}.{arch}.ptx")
    if not files:
        print("missing", c); continue
    ptx = max(files, key=os.path.getmtime)
    cub = tempfile.mktemp(suffix=".cubin")
    log = subprocess.run(["ptxas", "-arch=sm_90", "-O3", "-v", ptx, "-o", cub], capture_output=True, text=True).stderr
    info, cur = {}, None
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m: cur = m.group(1); info[cur] = [0, 0, 0]
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores", line)
        if m and cur: info[cur][1] = int(m.group(1)); info[cur][2] = int(m.group(2))
        m = re.search(r"Used (\d+) registers", line)
        if m and cur: info[cur][0] = int(m.group(1)); cur = None
    out = subprocess.run(["nvdisasm", "-c", cub], capture_output=True, text=True).stdout
    cnt, local, cur = {}, {}, None
    for line in out.splitlines():
        m = re.match(r"\s*\.text\.(\S+):", line)
        if m: cur = m.group(1); cnt[cur] = 0; local[cur] = 0; continue
        if cur and re.search(r"/\*[0-9a-f]{4,}\*/", line) and "NOP" not in line:
            cnt[cur] += 1
            if re.search(r"\b(LDL|STL)", line): local[cur] += 1
    for k, (r, st, sp) in info.items():
        rows.append(f"{c}\t{k}\t{r}\t{st}\t{sp}\t{cnt.get(k, -1)}\t{local.get(k, -1)}")
    os.unlink(cub)
open(out_path, "w").write("\n".join(rows) + "\n")
print(len(rows), "kernels")
