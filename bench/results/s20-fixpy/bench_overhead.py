"""Host-side cost of one ferrocuda_torch call on a GPU, before and after the G20R-2/G20R-3 fixes.

    python bench_overhead.py LABEL

Small tensors (the kernels take a few microseconds; the CPU side of a call is what is timed):
each row is the fastest and the median of 7 rounds of N calls back to back (time.perf_counter,
a torch.cuda.synchronize at the end of each round), in microseconds per call. Run once per
wheel in one GPU session and compare the rows. Also times torch's own pieces the fixes call
(`record_stream` of a tensor on its own stream, the two hook guards) for scale.
"""
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import ferrocuda_torch as ft


def per_call(f, calls=2000, rounds=7):
    for _ in range(200):
        f()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            f()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return min(times), statistics.median(times)


label = sys.argv[1] if len(sys.argv) > 1 else "?"
x = torch.randn(1024, device="cuda")
x2 = torch.randn(8, 64, device="cuda")
w = torch.randn(64, device="cuda")
y = torch.zeros(1024, device="cuda")
s = torch.cuda.current_stream()
base = torch._C.TensorBase


def guards():
    a = torch._C.DisableTorchFunction()
    a.__enter__()
    b = torch._C._DisableTorchDispatch()
    b.__enter__()
    b.__exit__(None, None, None)
    a.__exit__(None, None, None)


rows = [
    ("ft.gelu 1024 (torch.ops path, 1 input)", lambda: ft.gelu(x)),
    ("ft.rmsnorm 8x64 (torch.ops path, 2 inputs)", lambda: ft.rmsnorm(x2, w, 1e-6)),
    ("ft.dlpack.saxpy 1024 (DLPack path, 2 torch tensors)", lambda: ft.dlpack.saxpy(2.0, x, y)),
    ("torch F.gelu 1024 (torch eager, for scale)", lambda: F.gelu(x, approximate="tanh")),
    ("torch: TensorBase.record_stream(x, current) (same stream)", lambda: base.record_stream(x, s)),
    ("torch: the two hook guards entered and left", guards),
    ("torch: TensorBase.data_ptr(x)", lambda: base.data_ptr(x)),
]
print(f"[{label}] {torch.cuda.get_device_name(0)}, torch {torch.__version__}; us per call: fastest round, median")
for name, f in rows:
    try:
        fast, med = per_call(f)
        print(f"[{label}] {name:62s} {fast:7.2f} {med:7.2f}")
    except Exception as e:  # noqa: BLE001
        print(f"[{label}] {name:62s} failed: {type(e).__name__}: {e}")
ft.dlpack.release_pending(wait=True)
