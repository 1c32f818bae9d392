"""Per-call time of a small op, CPU-bound (1024 elements: the launch, not the kernel), for the
A/B of session 23's check at use (G23R-1): run once with main's wheels and once with the fixed
ones, in separate processes. `gelu` is the library's op (2 tensors: x, the output it allocates);
`hook` is `torch.ops.g23r1.scale_add_hook` of the G23R op crate (3 tensors, no hook set).
Prints one line: mode, microseconds per call (min and median of 7 runs of 3000 calls)."""

import importlib
import sys
import time

import torch

mode, module = sys.argv[1], sys.argv[2]
x = torch.ones(1024, device="cuda")
y = torch.ones_like(x)
if mode == "gelu":
    ft = importlib.import_module(module)
    f = lambda: ft.gelu(x)  # noqa: E731
else:
    importlib.import_module(module)
    f = lambda: torch.ops.g23r1.scale_add_hook(x, y, 2.0)  # noqa: E731
for _ in range(300):
    f()
torch.cuda.synchronize()
runs = []
for _ in range(7):
    t = time.perf_counter()
    for _ in range(3000):
        f()
    torch.cuda.synchronize()
    runs.append((time.perf_counter() - t) / 3000 * 1e6)
runs.sort()
print(f"{mode} {module}: {runs[0]:.2f} us/call min, {runs[3]:.2f} median")
