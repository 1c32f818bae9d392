"""Session 21: the thread's current CUDA context after a call.

G20R-4's class in this package: `glue::context` called `Context::bind_to_thread`, which left
the device's primary context current on the calling thread. A thread whose current context was
another one (a context of another library, or the primary context of another device, which is
torch's current device) found it replaced after an op: the CUDA runtime, and torch with it,
then allocated in, and reported the device of, ferrocuda's choice. A call now pushes the
device's context and pops it at its end.

Needs torch and a GPU (skips without them, fails under REQUIRE_GPU=1). ctypes is used only to
set up the other library's context (cuCtxCreate/cuCtxPopCurrent/cuCtxDestroy of libcuda).
While that context is current the test allocates nothing (the runtime would allocate in it):
it calls in-place functions on tensors made before.
"""

import ctypes
import os
import unittest


def _skip(test, why):
    if os.environ.get("REQUIRE_GPU") == "1":
        raise AssertionError(f"REQUIRE_GPU=1 but {test.id()} cannot run: {why}")
    raise unittest.SkipTest(why)


class CurrentContext(unittest.TestCase):
    def test_s21_calls_leave_the_threads_current_context_unchanged(self):
        try:
            import torch
        except ImportError as error:
            _skip(self, f"torch is not installed ({error})")
        if not torch.cuda.is_available():
            _skip(self, "no CUDA device visible to torch")
        import ferrocuda_torch as ft
        from ferrocuda_torch import dlpack as fd

        cuda = ctypes.CDLL("libcuda.so.1")

        def current():
            raw = ctypes.c_void_p()
            self.assertEqual(cuda.cuCtxGetCurrent(ctypes.byref(raw)), 0)
            return raw.value

        n = 4096
        p = torch.ones(n, device="cuda")
        g = torch.full((n,), 0.5, device="cuda")
        m = torch.zeros(n, device="cuda")
        v = torch.zeros(n, device="cuda")
        x = torch.ones(n, device="cuda")
        y = torch.zeros(n, device="cuda")
        # First calls (kernels loaded, the primary context retained) with torch's context current.
        ft.adamw_(p, g, m, v, lr=1e-3, step=1)
        fd.saxpy(2.0, x, y)
        torch.cuda.synchronize()
        torch_context = current()

        other = ctypes.c_void_p()
        # cuCtxCreate_v2(&ctx, flags, device 0) pushes the new context on this thread.
        self.assertEqual(cuda.cuCtxCreate_v2(ctypes.byref(other), 0, 0), 0)
        try:
            self.assertEqual(current(), other.value)
            ft.adamw_(p, g, m, v, lr=1e-3, step=2)
            self.assertEqual(current(), other.value, "an op left ferrocuda's context current")
            fd.saxpy(2.0, x, y)
            self.assertEqual(current(), other.value, "a DLPack function left ferrocuda's context current")
        finally:
            popped = ctypes.c_void_p()
            cuda.cuCtxPopCurrent_v2(ctypes.byref(popped))
            cuda.cuCtxDestroy_v2(other)
        self.assertEqual(current(), torch_context)
        torch.cuda.synchronize()
        self.assertTrue(torch.allclose(y, torch.full((n,), 4.0, device="cuda")))


if __name__ == "__main__":
    unittest.main()
