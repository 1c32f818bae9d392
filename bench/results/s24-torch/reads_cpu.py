"""The read at use of one tensor, on the CPU (no GPU needed): session 23's way and session 24's,
in one process (`ferrocuda_torch._C._bench_reads`, the branch's wheel). Neither includes
`record_stream` (CUDA only; overhead.py times it on the GPU). Prints microseconds per read: the
fastest and the median of 9 runs of N reads.

    PYTHONPATH=<the branch's unpacked wheel> python reads_cpu.py [N]
"""

import statistics
import sys

import torch

import ferrocuda_torch as ft

n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
x = torch.ones(1024)
ft._C._bench_reads(x, 2000)
runs = [ft._C._bench_reads(x, n) for _ in range(9)]
print(f"torch {torch.__version__}, python {sys.version.split()[0]}: us per read of one tensor ({n} reads x 9 runs: fastest, median)")
for i, (name, _) in enumerate(runs[0]):
    values = [r[i][1] for r in runs]
    print(f"{name:<64} {min(values):6.3f} {statistics.median(values):6.3f}")
