"""Held-out review of session 23 (audit/2026-11-29d/FINDINGS.md): G23R-1 .. G23R-4.

G23R-1: an op author's safe code (the closure of ``Op::launch`` or of ``Call``) ran Python code,
or let the GIL go, between the call's final read of a tensor and the launch: the kernel used
memory torch had freed and handed to another tensor. Fixed by reading each tensor again, with
every hook off, where the launch takes its slice (``kernel_arg``): a changed tensor refuses the
launch (a RuntimeError).

G23R-2: ``Call::stream()`` let safe code record ferrocuda-owned memory into torch's graph
(``torch.cuda.graph``), used after free at every replay. Fixed in the door: ferrocuda-owned memory
on a stream that its owner captures is refused (``OwnedMemoryInOwnerCapture``); and a clone of
the stream kept past the call refuses kernel launches (``StreamLoanEnded``).

G23R-3: outputs came from ``torch.empty_like``/``torch.empty`` found by name, and were not read
back. Fixed: torch's checked C ``TensorBase.new_empty``, dtypes checked to be torch's C ones,
and every output read back like the inputs.

G23R-4: ``Call::new`` returned a ``Call`` whose destructor restored the collector and the
current context; ``mem::forget`` skipped both. Fixed: ``Call::with(.., |call| ..)`` lends the call
by reference, and the collector is paused only inside ferrocuda's own frames.

G23R-1, -2 and -4 need an op whose author runs such code: ``tests/g23r_op`` (safe Rust only),
built into a wheel with maturin (the GPU job; ``G23R_OP_PATH`` names the folder it was unpacked
to). G23R-3 needs the library's wheel alone. Each case skips with the reason without torch, a
GPU or the op module, and fails under REQUIRE_GPU=1. Cases that poison a process-wide cache run
in a child process. unittest style (runs without pytest too).
"""

import os
import subprocess
import sys
import threading
import time
import unittest

N = 1 << 20  # 4 MiB of f32: torch's large pool, a freed block goes to the next tensor of that size


def _skip(test, why):
    if os.environ.get("REQUIRE_GPU") == "1":
        raise AssertionError(f"REQUIRE_GPU=1 but {test.id()} cannot run: {why}")
    raise unittest.SkipTest(why)


def _cuda_or_skip(test):
    try:
        import torch
    except ImportError as error:
        _skip(test, f"torch is not installed ({error})")
    if not torch.cuda.is_available():
        _skip(test, "no CUDA device visible to torch")
    return torch


def _op_or_skip(test):
    torch = _cuda_or_skip(test)
    path = os.environ.get("G23R_OP_PATH")
    if path and sys.path[:1] != [path]:
        # First: pytest puts this folder, which holds the crate's sources (tests/g23r_op, a
        # namespace package to `import`), before PYTHONPATH's entries.
        if path in sys.path:
            sys.path.remove(path)
        sys.path.insert(0, path)
    try:
        import g23r_op
    except ImportError as error:
        _skip(test, f"the g23r_op module (tests/g23r_op, built with maturin) is not importable ({error}); set G23R_OP_PATH")
    if not hasattr(g23r_op, "scale_add_into"):
        # `import g23r_op` found the crate's source folder beside this file (a namespace
        # package), not the built extension.
        _skip(test, f"g23r_op resolved to {list(getattr(g23r_op, '__path__', []))}, not the built module (tests/g23r_op, built with maturin); set G23R_OP_PATH")
    return torch, g23r_op


def _child(test, code, timeout=120):
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    test.assertEqual(done.returncode, 0, f"the child failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-3000:]}")
    return done.stdout


def _grab(torch, address, keep):
    """Tensors of 7.0 (up to 16, kept in `keep`) until one lands at `address`; returns it, or the last."""
    for _ in range(16):
        v = torch.full((N,), 7.0, device="cuda")
        keep.append(v)
        if v.data_ptr() == address:
            break
    return keep[-1]


def _fresh(torch):
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


class G23R1(unittest.TestCase):
    """The launch re-reads each tensor where it uses it: Python code run in between is caught."""

    def test_g23r1_a_hook_in_call_with_that_frees_the_output_refuses_the_launch(self):
        torch, g23r_op = _op_or_skip(self)
        _fresh(torch)
        x, y, out = torch.ones(N, device="cuda"), torch.ones(N, device="cuda"), torch.zeros(N, device="cuda")
        torch.cuda.synchronize()
        old, victim = out.data_ptr(), []

        def hook():
            out.untyped_storage().resize_(0)  # frees out's memory
            _grab(torch, old, victim)  # the freed block goes to a new tensor

        with self.assertRaisesRegex(RuntimeError, "G23R-1"):
            g23r_op.scale_add_into(x, y, out, 2.0, hook)
        torch.cuda.synchronize()
        self.assertTrue(bool((victim[-1] == 7.0).all()), "the kernel wrote the tensor that took the freed block")

    def test_g23r1_an_op_closure_hook_that_frees_an_input_refuses_the_launch(self):
        torch, g23r_op = _op_or_skip(self)
        _fresh(torch)
        x, y = torch.ones(N, device="cuda"), torch.ones(N, device="cuda")
        torch.cuda.synchronize()
        old, victim = x.data_ptr(), []

        def hook():
            x.untyped_storage().resize_(0)
            _grab(torch, old, victim)

        g23r_op.set_hook(hook)
        try:
            with self.assertRaisesRegex(RuntimeError, "G23R-1"):
                torch.ops.g23r1.scale_add_hook(x, y, 2.0)
        finally:
            g23r_op.set_hook(None)
        torch.cuda.synchronize()
        self.assertTrue(bool((victim[-1] == 7.0).all()))

    def test_g23r1_an_unchanged_tensor_launches_after_a_hook(self):
        """The re-read refuses only what changed: a hook that touches nothing launches as before."""
        torch, g23r_op = _op_or_skip(self)
        x, y, out = torch.ones(N, device="cuda"), torch.ones(N, device="cuda"), torch.zeros(N, device="cuda")
        calls = []
        g23r_op.scale_add_into(x, y, out, 2.0, lambda: calls.append(1))
        torch.cuda.synchronize()
        self.assertEqual(calls, [1])
        self.assertTrue(bool((out == 3.0).all()))

    def test_g23r1_another_thread_freeing_an_input_while_the_op_lets_the_gil_go_refuses_the_launch(self):
        torch, _ = _op_or_skip(self)
        _fresh(torch)
        x, y = torch.ones(N, device="cuda"), torch.ones(N, device="cuda")
        torch.cuda.synchronize()
        old, victim = x.data_ptr(), []

        def other():
            time.sleep(0.1)  # the op is inside its detach by then (300 ms)
            x.untyped_storage().resize_(0)
            _grab(torch, old, victim)

        t = threading.Thread(target=other)
        t.start()
        try:
            with self.assertRaisesRegex(RuntimeError, "G23R-1"):
                torch.ops.g23r1.scale_add_detach(x, y, 2.0)
        finally:
            t.join()
        torch.cuda.synchronize()
        self.assertTrue(victim and bool((victim[-1] == 7.0).all()))


class G23R2(unittest.TestCase):
    """Ferrocuda memory is refused inside torch's capture; a kept stream refuses launches."""

    def test_g23r2_a_ferrocuda_buffer_in_torchs_capture_is_refused(self):
        torch, g23r_op = _op_or_skip(self)
        x, y = torch.ones(N, device="cuda"), torch.ones(N, device="cuda")
        g23r_op.alloc_scratch(N)
        try:
            out = torch.ops.g23r1.scale_add_scratch(x, y, 2.0)  # outside a capture: allowed, ordered
            torch.cuda.synchronize()
            self.assertTrue(bool((out == 3.0).all()))
            g = torch.cuda.CUDAGraph()
            with self.assertRaisesRegex(Exception, "ferrocuda-owned memory"):
                with torch.cuda.graph(g):
                    torch.ops.g23r1.scale_add_scratch(x, y, 2.0)
        finally:
            g23r_op.free_scratch()
        torch.cuda.synchronize()
        # The op's own tensors still go into torch's graphs.
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = torch.ops.g23r1.scale_add_hook(x, y, 2.0)
        g.replay()
        torch.cuda.synchronize()
        self.assertTrue(bool((out == 3.0).all()))

    def test_g23r2_a_stream_kept_past_its_call_refuses_work(self):
        torch, g23r_op = _op_or_skip(self)
        x, out = torch.ones(16, device="cuda"), torch.empty(16, device="cuda")
        g23r_op.keep_stream(x, out)
        said = g23r_op.launch_on_kept_stream(16)
        self.assertIn("lent for one call", said)


class G23R3(unittest.TestCase):
    """Outputs come from torch's checked C allocator and are read back; names are not trusted."""

    def test_g23r3_a_rebound_torch_empty_like_decides_nothing(self):
        _cuda_or_skip(self)
        out = _child(
            self,
            r"""
import torch, ferrocuda_torch as ft
N = 1 << 20
x = torch.ones(N, device="cuda")
victim = torch.full((N,), 7.0, device="cuda")
torch.empty_like = lambda like, *a, **k: victim[:1]
torch.empty = lambda *a, **k: victim[:1]
out = ft.gelu(x)
torch.cuda.synchronize()
assert bool((victim == 7.0).all()), "the kernel wrote the victim"
assert out.shape == x.shape and out.data_ptr() != victim.data_ptr()
print("ok", float(out[0]))
""",
        )
        self.assertIn("ok", out)

    def test_g23r3_a_rebound_dtype_is_refused(self):
        _cuda_or_skip(self)
        out = _child(
            self,
            r"""
import torch, ferrocuda_torch as ft
x = torch.ones(1024, device="cuda")
torch.float32 = torch.float16  # before the first op call: the dtypes are looked up then
try:
    ft.gelu(x)
except Exception as e:
    print("refused:", e)
else:
    raise SystemExit("a rebound torch.float32 was taken")
""",
        )
        self.assertIn("torch.float32 is not torch's C object", out)


class G23R4(unittest.TestCase):
    """Nothing process-wide is left to a destructor of a value the op author holds."""

    def test_g23r4_forgetting_what_call_with_lends_leaves_the_collector_on(self):
        torch, g23r_op = _op_or_skip(self)
        import gc

        gc.enable()
        before = torch.cuda.current_device()
        g23r_op.forget_call(torch.ones(16, device="cuda"), torch.empty(16, device="cuda"))
        self.assertTrue(gc.isenabled(), "the collector was left off")
        self.assertEqual(torch.cuda.current_device(), before)


if __name__ == "__main__":
    unittest.main()
