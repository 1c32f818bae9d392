"""Open question (GC finalizers), with PyTorch (not run in session 21: no torch on the review machine; the one GPU call
went to G21R-1). A finalizer run by the cyclic GC inside a DLPack call resizes the storage of a
CPU tensor whose address the call has already read through `NoHooks::read` (data_ptr first,
then numel, element_size, ...: each returns a new Python int, each may collect garbage). The
storage grows (allocate, copy, free the old 16 MiB), x keeps its numel, the call copies x's old
memory: SIGSEGV with the mmap threshold fixed (as G21R-1), or wrong values. `skip` sweeps how
many finalizer runs pass before the resize, so one of the calls lands after the address read.

usage: python3 repro_torch.py   (runs the calls in a child process; prints its exit status)
"""
import gc
import os
import subprocess
import sys

N = 1 << 22


def child():
    import torch

    from ferrocuda_torch import dlpack as ft

    y = torch.zeros(N)
    state = {"on": False, "skip": 0, "alias": None}

    class Finalizer:
        def __init__(self):
            self.cycle = self

        def __del__(self):
            if not state["on"]:
                return
            if state["skip"] > 0:
                state["skip"] -= 1
                Finalizer()
                return
            state["on"] = False
            state["alias"].resize_(4 * N)  # torch: new storage, copy, free the old memory

    for skip in range(200):
        x = torch.ones(N)
        alias = torch.empty(0)
        alias.set_(x.untyped_storage(), 0, (N,), (1,))
        state.update(on=True, skip=skip, alias=alias)
        gc.set_threshold(1)
        Finalizer()
        try:
            ft.saxpy(2.0, x, y)
        finally:
            state["on"] = False
            gc.set_threshold(700)
    print("no crash in 200 calls")


if __name__ == "__main__":
    if sys.argv[1:] == ["child"]:
        child()
        sys.exit(0)
    r = subprocess.run([sys.executable, __file__, "child"], env=dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072"))
    print("child exit code", r.returncode, f"(signal {-r.returncode})" if r.returncode < 0 else "")
