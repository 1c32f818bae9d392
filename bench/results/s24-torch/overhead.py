"""Per-call host overhead of small ferrocuda ops on the GPU (1024 elements: the launch path, not
the kernel), beside torch eager, for session 24's A/B of the read at use (G23R-1's check, made
cheap): run once with main's wheel and once with the branch's, in separate processes (main's
registrar is G23L-1's: its two extensions must not share a process).

    python overhead.py LABEL [--op-module g23r_op] [--calls 3000]

Prints one line per op: label, op, tensors a launch uses, microseconds per call (min and median
of 7 rounds of N calls, each round ended by a synchronize), and torch eager's figure for the
same computation where there is one. With the branch's wheel, also the breakdown of one call
(`ferrocuda_torch._C._bench_call_parts`, microseconds per step). Then torch's own primitives the
read at use calls (record_stream, the two guards, the C getters), timed from Python.
"""

import argparse
import importlib
import statistics
import time

import torch
import torch.nn.functional as F


def per_call(f, calls, rounds=7):
    for _ in range(300):
        f()
    torch.cuda.synchronize()
    runs = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            f()
        torch.cuda.synchronize()
        runs.append((time.perf_counter() - start) / calls * 1e6)
    return min(runs), statistics.median(runs)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("label")
    parser.add_argument("--op-module", default=None)
    parser.add_argument("--calls", type=int, default=3000)
    args = parser.parse_args()
    import ferrocuda_torch as ft

    n = 1024
    x = torch.randn(4, n // 4, device="cuda")
    y = torch.randn_like(x)
    w = torch.randn(n // 4, device="cuda")
    ops = torch.ops.ferrocuda
    rows = [
        ("ferrocuda_torch.gelu", 2, lambda: ft.gelu(x), lambda: F.gelu(x, approximate="tanh")),
        ("torch.ops.ferrocuda.gelu_backward", 3, lambda: ops.gelu_backward(x, y), None),
        ("ferrocuda_torch.rmsnorm", 4, lambda: ft.rmsnorm(x, w), lambda: F.rms_norm(x, (n // 4,), w, 1e-6)),
        ("ferrocuda_torch.add_rmsnorm", 6, lambda: ft.add_rmsnorm(x, y, w), None),
    ]
    if args.op_module:
        importlib.import_module(args.op_module)
        rows.append(("torch.ops.g23r1.scale_add_hook", 3, lambda: torch.ops.g23r1.scale_add_hook(x, y, 2.0), lambda: torch.add(y, x, alpha=2.0)))
    print(f"== {args.label}: torch {torch.__version__}, {torch.cuda.get_device_name()}, {args.calls} calls x 7 rounds, us per call (min, median)")
    for name, tensors, ours, theirs in rows:
        o = per_call(ours, args.calls)
        line = f"{args.label:<7} {name:<36} tensors {tensors}  {o[0]:7.2f} {o[1]:7.2f}"
        if theirs is not None:
            t = per_call(theirs, args.calls)
            line += f"   torch eager {t[0]:6.2f} {t[1]:6.2f}   overhead vs torch {o[0] - t[0]:6.2f}"
        print(line, flush=True)
    parts = getattr(ft._C, "_bench_call_parts", None)
    if parts is not None:
        out = torch.empty_like(x)
        parts(x, out, 300)
        torch.cuda.synchronize()
        print(f"-- {args.label}: one call's parts (ferrocuda_torch._C._bench_call_parts, us per step, median of 5 runs of 2000)")
        runs = [parts(x, out, 2000) for _ in range(5)]
        torch.cuda.synchronize()
        for i, (step, _) in enumerate(runs[0]):
            print(f"{args.label:<7} {step:<60} {statistics.median(r[i][1] for r in runs):7.2f}")
    # torch's primitives, from Python (a vectorcall each)
    base = torch._C.TensorBase
    stream = torch.cuda.current_stream()
    record, data_ptr, is_contiguous = base.__dict__["record_stream"], base.__dict__["data_ptr"], base.__dict__["is_contiguous"]
    is_cuda = base.__dict__["is_cuda"].__get__
    dtf, dtd = torch._C.DisableTorchFunction(), torch._C._DisableTorchDispatch()
    f_in, f_out = type(dtf).__dict__["__enter__"], type(dtf).__dict__["__exit__"]
    d_in, d_out = type(dtd).__enter__, type(dtd).__exit__

    def guards():
        f_in(dtf)
        d_in(dtd)
        d_out(dtd, None, None, None)
        f_out(dtf, None, None, None)

    prims = [
        ("TensorBase.record_stream(x, current stream)", lambda: record(x, stream)),
        ("both guards in and out (kept objects)", guards),
        ("TensorBase.data_ptr(x)", lambda: data_ptr(x)),
        ("TensorBase.is_contiguous(x)", lambda: is_contiguous(x)),
        ("TensorBase.is_cuda getter", lambda: is_cuda(x)),
        ("empty lambda (the loop's own cost)", lambda: None),
    ]
    print(f"-- {args.label}: torch primitives from Python, us per call (min, median)")
    for name, f in prims:
        o = per_call(f, args.calls * 3)
        print(f"{args.label:<7} {name:<60} {o[0]:7.3f} {o[1]:7.3f}", flush=True)


if __name__ == "__main__":
    main()
