"""The host side of a ferrocuda op call, without a GPU: microseconds of CPU per call.

    python bench/overhead_cpu.py [--calls N]

Runs the ops in host-only mode (``_C._set_host_only(True)``): every step of a call up to the
driver runs as on a GPU (torch's dispatcher, the autograd kernel, the Rust checks of each
tensor, the outputs allocated by torch, the backward's wiring), on CPU tensors, and nothing is
launched (no context, no stream, no borrow, no kernel: those are the GPU run's part). Beside
them, for scale: torch's own eager op on the same CPU tensors, a torch.empty, and an empty
torch.library op whose CPU kernel is a Python function returning its input.

Each row gives the fastest and the median of 7 rounds of N calls (time.perf_counter), one
thread. On a shared machine the figures move with its load (the fastest round least); compare
rows of one run.
"""

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import ferrocuda_torch as ft


def per_call(f, calls, rounds=7):
    for _ in range(200):
        f()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            f()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return min(times), statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=5000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    lib = torch.library.Library("overhead_bench", "DEF")
    lib.define("identity(Tensor x) -> Tensor")
    lib.impl("identity", lambda x: x, "CPU")

    x, w, b = torch.randn(8, 64), torch.randn(64), torch.randn(64)
    xg, wg = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    q = torch.randn(1, 2, 16, 32)
    print(f"torch {torch.__version__}, host-only mode (no launch), {args.calls} calls x 7 rounds; us per call: fastest round, median")
    rows = [
        ("torch.empty(8, 64)", lambda: torch.empty(8, 64)),
        ("empty torch.library op (Python CPU kernel)", lambda: torch.ops.overhead_bench.identity(x)),
        ("F.rms_norm 8x64 (torch eager, CPU)", lambda: F.rms_norm(x, (64,), w, 1e-6)),
    ]
    ft._C._set_host_only(True)
    try:
        rows += [
            ("torch.ops.ferrocuda.rmsnorm (no grad)", lambda: torch.ops.ferrocuda.rmsnorm(x, w, 1e-6)),
            ("ft.rmsnorm (no grad)", lambda: ft.rmsnorm(x, w)),
            ("ft.rmsnorm (x, weight require grad)", lambda: ft.rmsnorm(xg, wg)),
            ("ft.layernorm (no grad)", lambda: ft.layernorm(x, w, b)),
            ("ft.add_rmsnorm (no grad)", lambda: ft.add_rmsnorm(x, x, w)),
            ("ft.gelu (no grad)", lambda: ft.gelu(x)),
            ("ft.attention (no grad)", lambda: ft.attention(q, q, q, True)),
        ]
        for name, f in rows:
            fastest, median = per_call(f, args.calls)
            print(f"{name:<48} {fastest:8.2f} {median:8.2f}", flush=True)
    finally:
        ft._C._set_host_only(False)


if __name__ == "__main__":
    main()
