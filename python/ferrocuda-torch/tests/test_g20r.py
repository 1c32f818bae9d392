"""Held-out review of session 20 (audit/2026-11-28h/FINDINGS.md), G20R-2 and G20R-3.

G20R-3: Python code that runs while a call reads its arguments (a DLPack producer's
``__dlpack__``, a tensor subclass's ``__torch_function__``) resizes a torch tensor whose address
was already read; ``resize_`` frees the old memory in place, and the kernel then read freed (or
reused) memory. Fixed by reading every address after the last such code, through torch's C
methods with the hooks off, and refusing a tensor that changed.

G20R-2: an op's input allocated on another stream and freed after the call was reused by torch
on that stream while the kernel still read it. Fixed by recording every tensor of a call on the
stream the work is queued on (``record_stream``).

The CPU cases need torch (not CUDA); the CUDA cases need a GPU. Each skips with the reason
without them and fails under REQUIRE_GPU=1 (the GPU machines have torch). The CPU case of the
DLPack functions runs in a child process, so that a crash (the finding's expected SIGSEGV)
fails the test instead of killing the run. unittest style (runs without pytest too).
"""

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


def _cuda_or_skip(test):
    torch = _torch_or_skip(test)
    if not torch.cuda.is_available():
        _skip(test, "no CUDA device visible to torch")
    return torch


# The DLPack case, as a program: `y = 2 x + y` with an output producer whose export re-points
# `x` (already an argument) to new memory and hands the old memory to a tensor of -7. Prints
# the number of wrong outputs. Before the fix the CPU executor read the freed memory (SIGSEGV,
# or the -7s) and the GPU kernel the -7s.
_REPOINT = r"""
import sys, torch
from ferrocuda_torch import dlpack as ft
device, n = sys.argv[1], 1 << 20

class Output:
    def __init__(self, out, victim):
        self.out, self.victim, self.reuse = out, victim, None
    def __dlpack_device__(self):
        return self.out.__dlpack_device__()
    def __dlpack__(self, *args, **kwargs):
        n = self.victim.numel()
        old = self.victim.data_ptr()
        self.victim.resize_(64 * n)  # new memory, the old freed now (the data copied over)
        self.victim.resize_(n)       # the same size again, in the new memory
        self.reuse = torch.full((n,), -7.0, device=self.victim.device)
        print("old memory reused by another tensor:", self.reuse.data_ptr() == old)
        return self.out.__dlpack__(*args, **kwargs)

x = torch.full((n,), 1.0, device=device)
y = torch.zeros((n,), device=device)
out = Output(y, x)
ft.saxpy(2.0, x, out)
if device == "cuda":
    ft.release_pending(wait=True)
    torch.cuda.synchronize()
print("WRONG", int((y != 2.0).sum().item()))
"""


class G20R3(unittest.TestCase):
    def repoint(self, device):
        done = subprocess.run([sys.executable, "-c", _REPOINT, device], capture_output=True, text=True, timeout=120)
        self.assertEqual(done.returncode, 0, f"G20R-3: the call crashed or failed ({done.returncode}): {done.stdout} {done.stderr[-2000:]}")
        wrong = [line for line in done.stdout.splitlines() if line.startswith("WRONG")]
        self.assertEqual(wrong, ["WRONG 0"], f"G20R-3: the kernel read memory freed by the producer's export: {done.stdout}")

    def test_g20r_3_cpu_dlpack_input_repointed_by_a_later_producer_is_read_anew(self):
        _torch_or_skip(self)
        self.repoint("cpu")

    def test_g20r_3_cuda_dlpack_input_repointed_by_a_later_producer_is_read_anew(self):
        _cuda_or_skip(self)
        self.repoint("cuda")

    def test_g20r_3_op_input_repointed_by_a_subclass_hook_is_refused(self):
        # The ops path, in host-only mode (CPU tensors, every check and the final read, no
        # launch): `w`'s __torch_function__ re-points `x` (read before it) when the op reads
        # w's address. The final read sees x's new address and refuses the call.
        torch = _torch_or_skip(self)
        import ferrocuda_torch as ft

        x = torch.randn(8, 64)

        class Hooked(torch.Tensor):
            fired = 0

            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                if func is torch.Tensor.data_ptr:
                    Hooked.fired += 1
                    x.resize_(64 * 8, 64)
                    x.resize_(8, 64)
                with torch._C.DisableTorchFunctionSubclass():
                    return func(*args, **(kwargs or {}))

        w = torch.randn(64).as_subclass(Hooked)
        ft._C._set_host_only(True, True)
        try:
            # Refused by the final read (G20R-3), or earlier when the allocator put an output
            # in x's freed memory, which x's stale address then overlaps (depends on the heap:
            # seen on session 21's run, after other tests); either way before any use.
            with self.assertRaisesRegex((RuntimeError, ValueError), "G20R-3|overlap in memory"):
                ft.ops._launchers["rmsnorm"](x, w, 1e-6)
        finally:
            ft._C._set_host_only(False, False)
        self.assertGreater(Hooked.fired, 0, "the hook never ran: the test did not test anything")

    def test_g20r_3_op_subclass_that_lies_about_its_storage_is_refused(self):
        # A subclass whose data_ptr() names another tensor's memory (the case glue.rs used to
        # document as trusted): the final read asks torch, not the subclass.
        torch = _torch_or_skip(self)
        import ferrocuda_torch as ft

        other = torch.zeros(64)

        class Liar(torch.Tensor):
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                if func is torch.Tensor.data_ptr:
                    return other.data_ptr()
                with torch._C.DisableTorchFunctionSubclass():
                    return func(*args, **(kwargs or {}))

        x = torch.randn(8, 64)
        w = torch.randn(64).as_subclass(Liar)
        ft._C._set_host_only(True, True)
        try:
            with self.assertRaisesRegex(RuntimeError, "not what (it reported|the op checked)"):
                ft.ops._launchers["rmsnorm"](x, w, 1e-6)
            # A subclass that does not interfere passes (nn.Parameter is one).
            ft.ops._launchers["rmsnorm"](x, torch.nn.Parameter(torch.randn(64)), 1e-6)
        finally:
            ft._C._set_host_only(False, False)


class G20R2(unittest.TestCase):
    def side_stream_case(self, op, n=1 << 24):
        """`op(x)` with `x` allocated on a side stream and dropped right after the call, while
        torch's current stream (where the kernel waits) is held by a sleep; the side stream then
        allocates the same size and writes it. Returns the number of wrong outputs."""
        torch = self.torch
        current = torch.cuda.current_stream()
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            x = torch.full((n,), 0.5, device="cuda")
        current.wait_stream(side)
        address = x.data_ptr()
        torch.cuda._sleep(200_000_000)
        y = op(x)
        del x
        with torch.cuda.stream(side):
            z = torch.empty((n,), device="cuda")
            z.fill_(-7.0)
        torch.cuda.synchronize()
        expected = op(torch.full((n,), 0.5, device="cuda"))
        torch.cuda.synchronize()
        print(f"block reused by the side stream at once: {z.data_ptr() == address}")
        return int((y != expected).sum().item())

    def setUp(self):
        self.torch = _cuda_or_skip(self)
        import ferrocuda_torch as ft

        self.ft = ft
        # The first call of the process loads the kernel module, which waits for the device.
        ft.gelu(self.torch.ones(1024, device="cuda"))
        self.torch.cuda.synchronize()

    def test_g20r_2_op_input_from_a_side_stream_is_not_reused_while_the_kernel_reads_it(self):
        self.assertEqual(self.side_stream_case(self.ft.gelu), 0, "G20R-2: the kernel read memory torch had handed to another tensor")

    def test_g20r_2_dlpack_tensor_resized_after_the_call_is_not_reused_while_the_kernel_reads_it(self):
        # The DLPack functions hold their arrays until the kernel completed (G18R-2), which a
        # resize_ after the call bypasses (it frees the memory in place): recorded on the stream.
        torch, ft = self.torch, self.ft

        def saxpy(x):
            y = torch.zeros_like(x)
            ft.dlpack.saxpy(2.0, x, y)
            x.resize_(2 * x.numel())  # frees x's memory now, into the side stream's pool
            return y

        self.assertEqual(self.side_stream_case(saxpy), 0, "G20R-2: the kernel read memory torch had handed to another tensor")
        ft.dlpack.release_pending(wait=True)


if __name__ == "__main__":
    unittest.main()
