"""Session 22: the residuals of sessions 21's fixes in this package.

1. The thread's current CUDA context. The host crate's calls left a *primary* context current
   (its internal bind used cuCtxSetCurrent and no restore), so session 21 pushed the context
   around the release of parked DLPack calls (their events destroyed, the context waited for).
   The host now restores the caller's context for every kind of context, and those pushes are
   gone: releasing parked calls, with and without the wait, must leave another library's
   context current.
2. ``torch._C._DisableTorchDispatch``, the one guard torch makes with pybind11 (a heap type
   whose attributes Python code can set). A Python subclass of it with torch's own
   ``__enter__``/``__exit__`` copied in passed session 21's method checks, and its instances'
   ``__del__`` ran right after the final read of the addresses. The class is now checked to be
   made by C code, and one guard instance per thread is kept, so a ``__del__`` put on torch's
   class never runs inside a call.

Needs torch (CPU tensors for 2, a GPU for 1); skips without them, fails under REQUIRE_GPU=1.
ctypes is used only to set up the other library's context (as test_s21.py does). Cases that
poison the package's process-wide cache of torch's API run in a child process.
"""

import ctypes
import os
import subprocess
import sys
import unittest


def _skip(test, why):
    if os.environ.get("REQUIRE_GPU") == "1":
        raise AssertionError(f"REQUIRE_GPU=1 but {test.id()} cannot run: {why}")
    raise unittest.SkipTest(why)


def _torch_or_skip(test):
    try:
        import torch
    except ImportError as error:
        _skip(test, f"torch is not installed ({error})")
    return torch


def _child(test, code):
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    test.assertEqual(done.returncode, 0, f"the child failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-3000:]}")
    return done.stdout


class ReleaseKeepsTheCurrentContext(unittest.TestCase):
    def test_s22_releasing_parked_dlpack_calls_leaves_the_threads_current_context_unchanged(self):
        torch = _torch_or_skip(self)
        if not torch.cuda.is_available():
            _skip(self, "no CUDA device visible to torch")
        from ferrocuda_torch import dlpack as fd

        cuda = ctypes.CDLL("libcuda.so.1")

        def current():
            raw = ctypes.c_void_p()
            self.assertEqual(cuda.cuCtxGetCurrent(ctypes.byref(raw)), 0)
            return raw.value

        n = 1 << 20
        x = torch.ones(n, device="cuda")
        y = torch.zeros(n, device="cuda")
        fd.release_pending(wait=True)
        torch.cuda.synchronize()
        torch_context = current()
        for wait in (False, True):
            # A call whose capsules stay parked: its kernel is queued behind a long sleep.
            torch.cuda._sleep(50_000_000)
            fd.saxpy(1.0, x, y)
            self.assertGreater(fd.pending(), 0, "the call's arrays were not parked")
            if not wait:
                torch.cuda.synchronize()  # the release below finds the work complete
            other = ctypes.c_void_p()
            # cuCtxCreate_v2(&ctx, flags, device 0) pushes the new context on this thread.
            self.assertEqual(cuda.cuCtxCreate_v2(ctypes.byref(other), 0, 0), 0)
            try:
                self.assertEqual(current(), other.value)
                # Without the wait: the events, complete, destroyed; with it: waited for first.
                left = fd.release_pending(wait=wait)
                self.assertEqual(current(), other.value, f"release_pending(wait={wait}) changed the thread's current context")
                self.assertEqual(left, 0, f"release_pending(wait={wait}) left arrays parked")
            finally:
                popped = ctypes.c_void_p()
                cuda.cuCtxPopCurrent_v2(ctypes.byref(popped))
                cuda.cuCtxDestroy_v2(other)
            self.assertEqual(current(), torch_context)
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(y, torch.full((n,), 2.0, device="cuda")))


# A Python subclass of torch's guard with torch's own methods copied in (they pass session 21's
# method checks: pybind11's wrappers of C functions whose signature names the class), and a
# __del__ that would run inside a call when the guard is dropped after the final read.
_SUBCLASS = r"""
import torch
from ferrocuda_torch import dlpack as fd
real = torch._C._DisableTorchDispatch
ran = []
try:
    class _DisableTorchDispatch(real):
        __enter__ = real.__dict__["__enter__"]
        __exit__ = real.__dict__["__exit__"]
        def __del__(self):
            ran.append("__del__")
except TypeError as error:  # a final pybind11 class: nothing to refuse
    print("patched: refused: torch's class cannot be subclassed:", error)
    _DisableTorchDispatch = None
if _DisableTorchDispatch is not None:
    torch._C._DisableTorchDispatch = _DisableTorchDispatch
    try:
        fd.saxpy(1.0, torch.ones(4), torch.zeros(4))
        print("patched: accepted")
    except RuntimeError as error:
        print("patched: refused:", str(error)[:200])
    finally:
        torch._C._DisableTorchDispatch = real
print("subclass code ran:", ran)
x, y = torch.ones(4), torch.zeros(4)
fd.saxpy(2.0, x, y)
assert y.tolist() == [2.0] * 4, y
print("real tensors still work")
"""

# torch's own class, with a __del__ set on it (its attributes can be set): the guard instance of
# a thread is made once and kept, so the finalizer never runs inside a call.
_DEL_ON_TORCH_CLASS = r"""
import torch
from ferrocuda_torch import dlpack as fd
ran = []
torch._C._DisableTorchDispatch.__del__ = lambda self: ran.append(1)
x, y = torch.ones(4), torch.zeros(4)
for _ in range(50):
    fd.saxpy(1.0, x, y)
assert y.tolist() == [50.0] * 4, y
print("finalizer runs during 50 calls:", len(ran))
"""


class DispatchGuard(unittest.TestCase):
    def test_s22_dispatch_guard_python_subclass_is_refused(self):
        _torch_or_skip(self)
        out = _child(self, _SUBCLASS)
        self.assertIn("patched: refused", out, f"a Python subclass at torch._C._DisableTorchDispatch was accepted: {out}")
        self.assertIn("subclass code ran: []", out)
        self.assertIn("real tensors still work", out)

    def test_s22_dispatch_guard_del_set_on_torch_class_never_runs_inside_a_call(self):
        _torch_or_skip(self)
        out = _child(self, _DEL_ON_TORCH_CLASS)
        self.assertIn("finalizer runs during 50 calls: 0", out)


if __name__ == "__main__":
    unittest.main()
