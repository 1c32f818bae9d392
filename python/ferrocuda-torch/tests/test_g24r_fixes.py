"""Held-out review of session 24 (audit/2026-11-29f/FINDINGS.md): G24R-1 and G24R-2.

G24R-1: the check at use (G23R-1's fix) was atomic per tensor, not per launch. A launcher checks
its arguments in order (x, y, out); each check records the tensor on the launch stream
(``record_stream``, a torch op whose binding lets the GIL go) and then reads it. While the check
of ``y`` waited in ``record_stream``, another thread's Python code could free ``x`` (read already)
and hand its memory to a new tensor: the kernel then used it. Fixed: each check at use reads
again every tensor a launch took so far, after its own ``record_stream``, so the last argument's
check reads all of them after the last GIL release.

G24R-2: a ``Call::with`` opened inside another call's closure lent slices that one launch could
mix (an input of the outer call overlapping an output of the inner one): each call checks only
its own tensors. Fixed: one open call per thread; a second is refused with an error.

Both need ``tests/g23r_op`` (safe Rust only), built into a wheel with maturin (``G23R_OP_PATH``
names the folder it was unpacked to; scripts/check-python.sh does it). Each case skips with the
reason without torch, a GPU or the op module, and fails under REQUIRE_GPU=1. unittest style.
"""

import os
import re
import sys
import threading
import time
import unittest

N = 1 << 20  # 4 MiB of f32: torch's large pool, a freed block goes to the next tensor of that size


def _skip(test, why):
    if os.environ.get("REQUIRE_GPU") == "1":
        raise AssertionError(f"REQUIRE_GPU=1 but {test.id()} cannot run: {why}")
    raise unittest.SkipTest(why)


def _op_or_skip(test):
    try:
        import torch
    except ImportError as error:
        _skip(test, f"torch is not installed ({error})")
    if not torch.cuda.is_available():
        _skip(test, "no CUDA device visible to torch")
    path = os.environ.get("G23R_OP_PATH")
    if path and path not in sys.path:
        sys.path.insert(0, path)
    try:
        import g23r_op
    except ImportError as error:
        _skip(test, f"the g23r_op module (tests/g23r_op, built with maturin) is not importable ({error}); set G23R_OP_PATH")
    if not hasattr(g23r_op, "nested_calls"):
        _skip(test, f"g23r_op resolved to {getattr(g23r_op, '__file__', None) or list(getattr(g23r_op, '__path__', []))}, not a build of tests/g23r_op with nested_calls; set G23R_OP_PATH")
    return torch, g23r_op


class G24R2(unittest.TestCase):
    """One open call per thread: a launch cannot mix the slices of two calls."""

    def test_g24r2_a_call_inside_another_calls_closure_is_refused(self):
        torch, g23r_op = _op_or_skip(self)
        t = torch.arange(N, device="cuda", dtype=torch.float32)
        y = torch.ones(N - 1, device="cuda")
        before = t.clone()
        # The control: in one call the overlap of x and out is refused by the call's own check.
        with self.assertRaisesRegex(ValueError, "overlap in memory"):
            g23r_op.scale_add_into(t[:-1], y, t[1:], 2.0, lambda: None)
        # Nested: x, y of the outer call, out (overlapping x) of the inner one; and out == x.
        for x, out in ((t[:-1], t[1:]), (t[:-1], t[:-1])):
            with self.assertRaisesRegex(RuntimeError, re.compile("g24r2::inner: called while `g24r2::outer` is running on this thread.*G24R-2", re.S)):
                g23r_op.nested_calls(x, y, out, 2.0)
        torch.cuda.synchronize()
        self.assertTrue(bool(torch.equal(t, before)), "the refused launch wrote the tensor")

    def test_g24r2_an_op_called_from_a_calls_closure_is_refused(self):
        torch, g23r_op = _op_or_skip(self)
        x, y, out = torch.ones(N, device="cuda"), torch.ones(N, device="cuda"), torch.zeros(N, device="cuda")
        # From `Call::with`'s closure, Python code calling an `Op`.
        with self.assertRaisesRegex(RuntimeError, re.compile("g23r1::scale_add_hook: called while `g23r1::scale_add_into` is running.*G24R-2", re.S)):
            g23r_op.scale_add_into(x, y, out, 2.0, lambda: torch.ops.g23r1.scale_add_hook(x, y, 1.0))
        # From an `Op`'s closure, Python code opening a `Call::with`.
        g23r_op.set_hook(lambda: g23r_op.scale_add_into(x, y, out, 2.0, lambda: None))
        try:
            with self.assertRaisesRegex(RuntimeError, re.compile("g23r1::scale_add_into: called while `g23r1::scale_add_hook` is running.*G24R-2", re.S)):
                torch.ops.g23r1.scale_add_hook(x, y, 1.0)
        finally:
            g23r_op.set_hook(None)
        torch.cuda.synchronize()
        self.assertTrue(bool((out == 0.0).all()), "a refused call launched")

    def test_g24r2_calls_one_after_another_still_launch(self):
        """The refusal ends with the outer call (a refused or failed call leaves nothing open)."""
        torch, g23r_op = _op_or_skip(self)
        x, y, out = torch.ones(N, device="cuda"), torch.ones(N, device="cuda"), torch.zeros(N, device="cuda")
        with self.assertRaises(RuntimeError):
            g23r_op.nested_calls(x, y, out, 2.0)
        with self.assertRaises(ZeroDivisionError):
            g23r_op.scale_add_into(x, y, out, 2.0, lambda: 1 / 0)
        g23r_op.scale_add_into(x, y, out, 2.0, lambda: None)
        z = torch.ops.g23r1.scale_add_hook(x, y, 3.0)
        torch.cuda.synchronize()
        self.assertTrue(bool((out == 3.0).all()))
        self.assertTrue(bool((z == 4.0).all()))


class _Strike:
    """Another thread that frees `x` while the launcher checks a later argument (the review's
    refcount trigger: inside record_stream(t) its argument tuple holds one more reference to t).
    Strikes in the `at`-th window of `y` after arming."""

    def __init__(self, torch, x, y, at):
        self.torch, self.x, self.y, self.at = torch, x, y, at
        self.base = None
        self.y_windows = 0
        self.last = None
        self.done = False
        self.struck = False
        self.victim = None
        self.x_address = x.data_ptr()

    def skew(self):
        return sys.getrefcount(self.x) - sys.getrefcount(self.y)

    def arm(self):
        self.base = self.skew()

    def run(self):
        while not self.done and not self.struck:
            if self.base is None:
                continue
            d = self.skew() - self.base
            seen = "x" if d > 0 else "y" if d < 0 else None
            if seen is None or seen == self.last:
                continue
            self.last = seen
            if seen == "y":
                self.y_windows += 1
                if self.y_windows == self.at:
                    self.x.untyped_storage().resize_(0)  # x's memory freed; the call still holds x
                    self.victim = self.torch.full((N,), 7.0, device="cuda")  # torch's cache hands it on
                    self.struck = True


class G24R1(unittest.TestCase):
    """Each check at use reads every tensor taken so far: a later argument's GIL release is caught."""

    def _trials(self, torch, run_op, nohook, most=400):
        seconds = float(os.environ.get("G24R1_SECONDS", "6"))
        old = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)  # the waiting thread asks for the GIL at once
        struck = refused = 0
        unsound = []
        try:
            deadline = time.monotonic() + seconds
            trial = 0
            while trial < most and time.monotonic() < deadline:
                trial += 1
                x, y, out = torch.ones(N, device="cuda"), torch.full((N,), 2.0, device="cuda"), torch.zeros(N, device="cuda")
                torch.cuda.synchronize()
                strike = _Strike(torch, x, y, at=1 + trial % 2 if nohook else 1)
                if nohook:
                    strike.arm()
                thread = threading.Thread(target=strike.run, daemon=True)
                thread.start()
                launched = True
                try:
                    run_op(x, y, out, strike)
                except RuntimeError as error:
                    launched = False
                    # Refused at use (G23R-1's panic turned into an error), or, for a strike before
                    # the call's own start-of-call read where there is one, by that read.
                    # A strike before the call's first read finds x already freed (address 0),
                    # which the borrow refuses before any check at use.
                    self.assertTrue(
                        "is not what the op checked" in str(error) or "cannot start at address 0" in str(error), str(error)
                    )
                strike.done = True
                thread.join(5)
                torch.cuda.synchronize()
                if strike.struck:
                    struck += 1
                    if launched:
                        same = strike.victim.data_ptr() == strike.x_address
                        unsound.append(f"trial {trial}: launched after x was freed (victim at x's old address: {same}; victim intact: {bool((strike.victim == 7.0).all())})")
                    else:
                        refused += 1
                        self.assertTrue(bool((strike.victim == 7.0).all()), "a refused launch wrote the victim")
        finally:
            sys.setswitchinterval(old)
        report = f"{trial} trials, the thread struck in {struck}, {refused} refused"
        print(f"G24R-1 ({'nohook' if nohook else 'hook'}): {report}", file=sys.stderr)
        self.assertEqual(unsound, [], f"G24R-1 UNSOUND: {report}")
        return struck

    def test_g24r1_another_thread_freeing_an_earlier_argument_during_a_later_arguments_check_refuses_the_launch(self):
        """`Call::with`: the op's hook arms the thread, which strikes in y's at-use window."""
        torch, g23r_op = _op_or_skip(self)
        self._trials(torch, lambda x, y, out, strike: g23r_op.scale_add_into(x, y, out, 3.0, strike.arm), nohook=False)

    def test_g24r1_the_same_through_an_op_with_no_hook(self):
        """`Op` (what the library's ops are): no op-author code; the thread strikes in a y window."""
        torch, g23r_op = _op_or_skip(self)
        g23r_op.set_hook(None)
        self._trials(torch, lambda x, y, out, strike: torch.ops.g23r1.scale_add_hook(x, y, 3.0), nohook=True)


if __name__ == "__main__":
    unittest.main()
