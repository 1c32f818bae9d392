"""Merges the all-reduce benchmark outputs (lines `<impl> <bytes> <time_us> <algbw> <busbw>`)
into the markdown table for BENCHMARKS.md. Usage: merge_results.py raw.txt > table.md"""
import sys


def human(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n // size} {unit}"
    return f"{n} B"


rows, headers = {}, []
for line in open(sys.argv[1]):
    parts = line.split()
    if line.startswith("#"):
        headers.append(line.strip("# \n"))
        continue
    if len(parts) != 5:
        continue
    impl, size, us, algbw, busbw = parts[0], int(parts[1]), float(parts[2]), float(parts[3]), float(parts[4])
    rows.setdefault(size, {})[impl] = (us, algbw, busbw)

for h in headers:
    print(f"- {h}")
print()
print("| size | ferrocuda NCCL µs | busbw GB/s | C++ libnccl µs | busbw GB/s | ours / C++ (busbw) | torch.distributed µs | busbw GB/s | Rust peer kernel µs | busbw GB/s | peer speed-up vs our NCCL |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for size in sorted(rows):
    r = rows[size]

    def cell(name):
        return (f"{r[name][0]:.1f}", f"{r[name][2]:.2f}") if name in r else ("", "")

    ours, cpp, torch, peer = cell("ferrocuda-nccl"), cell("cpp-nccl"), cell("torch-nccl"), cell("ferrocuda-peer")
    ratio = f"{r['ferrocuda-nccl'][2] / r['cpp-nccl'][2]:.3f}" if "ferrocuda-nccl" in r and "cpp-nccl" in r and r["cpp-nccl"][2] > 0 else ""
    speedup = f"{r['ferrocuda-nccl'][0] / r['ferrocuda-peer'][0]:.2f}x" if "ferrocuda-nccl" in r and "ferrocuda-peer" in r else ""
    print(f"| {human(size)} | {ours[0]} | {ours[1]} | {cpp[0]} | {cpp[1]} | {ratio} | {torch[0]} | {torch[1]} | {peer[0]} | {peer[1]} | {speedup} |")
