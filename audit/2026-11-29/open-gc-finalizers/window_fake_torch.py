"""Open question (GC finalizers), tried without torch: a stand-in `torch` whose "C methods" really are C code
(operator.attrgetter, property over attrgetter, _thread locks as the hook guards), so that the
only Python code that can run inside the call is what the garbage collector runs. The stand-in
tensor owns its memory (a NumPy array) and a `resize_` that does what torch's does: new memory,
copy, swap the data pointer, free the old memory. A finalizer of a garbage cycle calls it; the
call has already read the address (NoHooks::read reads every data_ptr first, then numel etc.,
each through a pyo3 call whose argument tuple is a GC-tracked allocation: on CPython <= 3.11 an
allocation can run a collection, and so finalizers). `skip` sweeps when the finalizer acts.

usage: python3 window_fake_torch.py   (prints the child's exit status: -11 = SIGSEGV)
"""
import _thread
import gc
import operator
import os
import subprocess
import sys
import types

N = 1 << 22  # 16 MiB of float32


def child():
    import numpy as np

    from ferrocuda_torch import dlpack as ft

    class Base:  # torch._C.TensorBase's stand-in: every method below is C code
        data_ptr = operator.attrgetter("address")
        numel = operator.attrgetter("n")
        element_size = operator.attrgetter("four")
        is_contiguous = operator.attrgetter("yes")
        is_floating_point = operator.attrgetter("yes")
        is_neg = operator.attrgetter("no")
        get_device = operator.attrgetter("no")
        record_stream = operator.attrgetter("no")  # not called on the CPU path
        size = operator.attrgetter("n", "one")  # a new tuple a call, as torch.Size (a GC-tracked tuple)
        requires_grad = property(operator.attrgetter("no"))
        is_cuda = property(operator.attrgetter("no"))
        is_cpu = property(operator.attrgetter("yes"))
        device = property(operator.attrgetter("shape"))

        def __init__(self, n):
            self.array = np.ones(n, np.float32)
            self.address = self.array.__array_interface__["data"][0]
            self.n, self.one, self.four, self.yes, self.no, self.shape = n, 1, 4, True, False, [n]

        def resize_(self, n):  # torch's: allocate, copy, swap the pointer, free the old memory
            new = np.empty(n, np.float32)
            new[: self.n] = self.array
            self.array, self.address = new, new.__array_interface__["data"][0]

    torch = types.ModuleType("torch")
    torch._C = types.SimpleNamespace(TensorBase=Base, DisableTorchFunction=_thread.allocate_lock, _DisableTorchDispatch=_thread.allocate_lock)
    torch.cuda = types.SimpleNamespace(current_stream=None)
    sys.modules["torch"] = torch

    state = {"on": False, "skip": 0, "x": None, "ran": 0}

    class Finalizer:
        def __init__(self):
            self.cycle = self

        def __del__(self):
            if not state["on"]:
                return
            state["ran"] += 1
            # The call holds x once more from the moment it has read x's address (`Imported`'s
            # `keep`) until it returns: act only then (sys.getrefcount is safe Python).
            if state["skip"] > 0 or sys.getrefcount(state["x"]) <= state["base"]:
                state["skip"] -= 1
                Finalizer()
                return
            state["on"] = False
            state["x"].resize_(4 * N)

    y = np.zeros(N, np.float32)
    for skip in range(5):
        x = Base(N)
        state.update(on=True, skip=skip, x=x, ran=0)
        # x is held here by `x`, `state` and getrefcount's argument; inside the call also by its
        # argument and one reference of the binding: 5 (measured, CPython 3.11); 6 with `keep`.
        state["base"] = sys.getrefcount(x) + 2
        gc.set_threshold(1)
        Finalizer()
        try:
            ft.saxpy(2.0, x, y)
        finally:
            state["on"] = False
            gc.set_threshold(700)
        print(f"skip {skip}: the finalizer ran {state['ran']} times in the call; y[0] = {y[0]}", flush=True)
    print("no crash")


if __name__ == "__main__":
    if sys.argv[1:] == ["child"]:
        child()
        sys.exit(0)
    r = subprocess.run([sys.executable, __file__, "child"], env=dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072"))
    print("child exit code", r.returncode, f"(signal {-r.returncode})" if r.returncode < 0 else "")
