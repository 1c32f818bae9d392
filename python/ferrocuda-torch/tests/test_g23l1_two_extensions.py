"""G23L-1 (audit/2026-11-29d/FINDINGS.md): two extension modules built on ferrocuda-torch in one
process.

``ferrocuda_torch`` and the test op crate ``g23r_op`` (tests/g23r_op) each link their own copy of
the glue. Each copy ran the op registrar (``register.py``) with ``PyModule::from_code`` under one
module name, which re-runs the code in the module of that name already in ``sys.modules``: the
second registration in a process reset its ``_LIBRARIES``, torch freed the first extension's
``torch.library.Library`` objects and unregistered their ops, and the operator handles taken
before (``torch.ops.ferrocuda.gelu.default``, kept by ``ferrocuda_torch.ops``) pointed at the
dispatcher's freed entries: ``ferrocuda_torch.gelu(x)`` ran ``g23r1::scale_add_scratch``, the op
registered next. Fixed: one registrar per copy of the crate, outside ``sys.modules``, kept for the
life of the process (src/op.rs, ``registrar``).

The cases: both import orders (a child process each), and this process (whatever the other test
files imported before), each calling ops of both extensions through handles taken before the
other extension loaded: ``ferrocuda::gelu`` and ``g23l1::gelu`` (g23r_op's, registered in a second
``op::register`` call, of the same signature and name in another namespace: ``3 * x``), and
``g23r1::scale_add_hook`` (g23r_op's first registration). On CPU tensors each op's own Rust code
refuses the tensor with its own name (runs without a GPU); on CUDA tensors each computes its own
result. unittest style (runs without pytest too); needs torch and the built ``g23r_op``
(``G23R_OP_PATH``, as test_g23r_fixes.py), skips without them and fails under REQUIRE_GPU=1.
"""

import os
import subprocess
import sys
import unittest

# Imports the two extensions in the order given (argv[1], comma-separated), taking each one's
# operator handles right after its import, then calls every handle: the CPU refusal names the
# op that ran; with a GPU, each result is that op's. Prints one line per check.
CHILD = r"""
import faulthandler
import sys

faulthandler.dump_traceback_later(100, exit=True)  # a hang says where, before the parent's timeout
import torch
import torch.nn.functional as F

order = sys.argv[1].split(",")
handles = {}
modules = {}
for name in order:
    modules[name] = __import__(name)
    if name == "ferrocuda_torch":
        handles["ferrocuda::gelu"] = torch.ops.ferrocuda.gelu.default
        handles["ferrocuda_torch.gelu"] = modules[name].gelu
    else:
        handles["g23l1::gelu"] = torch.ops.g23l1.gelu.default
        handles["g23r1::scale_add_hook"] = torch.ops.g23r1.scale_add_hook.default

def cpu_refusal(name, call):
    x = torch.ones(8)
    try:
        call(x)
    except Exception as error:
        text = str(error)
    else:
        raise AssertionError(f"{name}: a CPU tensor was not refused")
    want = "ferrocuda::gelu" if "ferrocuda" in name else name
    assert text.startswith(want + ":") or (want + ":") in text.splitlines()[0], f"{name} ran another op: {text[:300]}"
    print(f"cpu {name}: refused by its own op")

cpu_refusal("ferrocuda::gelu", handles["ferrocuda::gelu"])
cpu_refusal("ferrocuda_torch.gelu", handles["ferrocuda_torch.gelu"])
cpu_refusal("g23l1::gelu", handles["g23l1::gelu"])
cpu_refusal("g23r1::scale_add_hook", lambda x: handles["g23r1::scale_add_hook"](x, x, 2.0))

if torch.cuda.is_available():
    x = torch.randn(4099, device="cuda")
    y = torch.randn(4099, device="cuda")
    def check(name, got, expected, what):
        # test_ops.py's measure for float32: max error over max(1, max |reference|), 1e-4.
        err = (got - expected).abs().max().item() / max(1.0, expected.abs().max().item())
        assert err <= 1e-4, f"{name}: not {what} (relative max error {err:.3g}): another op ran"
        print(f"cuda {name}: {what}")

    for name in ("ferrocuda::gelu", "ferrocuda_torch.gelu"):
        check(name, handles[name](x), F.gelu(x, approximate="tanh"), "GELU")
    check("g23l1::gelu", handles["g23l1::gelu"](x), 3 * x, "3x")
    check("g23r1::scale_add_hook", handles["g23r1::scale_add_hook"](x, y, 2.0), 2 * x + y, "2x + y")
    torch.cuda.synchronize()
else:
    print("cuda: no device, the CPU checks only")
"""


def _skip(test, why):
    if os.environ.get("REQUIRE_GPU") == "1":
        raise AssertionError(f"REQUIRE_GPU=1 but {test.id()} cannot run: {why}")
    raise unittest.SkipTest(why)


def _op_path_or_skip(test):
    """The folder the g23r_op wheel was unpacked to (``G23R_OP_PATH``), checked to hold the built
    module; skips (fails under REQUIRE_GPU=1) without torch or it."""
    try:
        import torch  # noqa: F401
    except ImportError as error:
        _skip(test, f"torch is not installed ({error})")
    path = os.environ.get("G23R_OP_PATH")
    if not path:
        _skip(test, "G23R_OP_PATH is not set (the folder of the built g23r_op extension, tests/g23r_op, built with maturin)")
    if not any(name.startswith("g23r_op") and name.endswith((".so", ".pyd")) for root, _, files in os.walk(path) for name in files):
        _skip(test, f"G23R_OP_PATH={path} holds no built g23r_op module")
    return path


class G23L1TwoExtensions(unittest.TestCase):
    def _child(self, order):
        path = _op_path_or_skip(self)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([path] + [p for p in sys.path if p])
        try:
            done = subprocess.run([sys.executable, "-c", CHILD, order], capture_output=True, text=True, timeout=120, env=env, cwd=path)
        except subprocess.TimeoutExpired as expired:
            self.fail(f"order {order}: the child did not finish in 120 s:\n{expired.stdout}\n{str(expired.stderr)[-3000:]}")
        self.assertEqual(done.returncode, 0, f"order {order}: the child failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-3000:]}")
        self.assertIn("cpu g23r1::scale_add_hook: refused by its own op", done.stdout)
        if os.environ.get("REQUIRE_GPU") == "1":
            self.assertIn("cuda g23r1::scale_add_hook: 2x + y", done.stdout, done.stdout)
        return done.stdout

    def test_g23l1_library_first_then_op_crate(self):
        self._child("ferrocuda_torch,g23r_op")

    def test_g23l1_op_crate_first_then_library(self):
        self._child("g23r_op,ferrocuda_torch")

    def test_g23l1_in_this_process(self):
        """The suite's own process, after whatever the other files imported (test_g23r_fixes.py
        imports g23r_op; most files import ferrocuda_torch)."""
        path = _op_path_or_skip(self)
        if sys.path[:1] != [path]:
            # First: pytest puts this folder, which holds the crate's sources (tests/g23r_op, a
            # namespace package to `import`), before PYTHONPATH's entries.
            if path in sys.path:
                sys.path.remove(path)
            sys.path.insert(0, path)
        import ferrocuda_torch
        import g23r_op
        import torch
        import torch.nn.functional as F

        if not hasattr(g23r_op, "scale_add_into"):
            _skip(self, f"g23r_op resolved to {list(getattr(g23r_op, '__path__', []))}, not the built module; set G23R_OP_PATH")
        calls = {
            "ferrocuda::gelu": torch.ops.ferrocuda.gelu.default,
            "ferrocuda_torch.gelu": ferrocuda_torch.gelu,
            "g23l1::gelu": torch.ops.g23l1.gelu.default,
        }
        for name, call in calls.items():
            with self.assertRaises(Exception) as caught:
                call(torch.ones(8))
            want = "ferrocuda::gelu" if "ferrocuda" in name else name
            self.assertTrue(str(caught.exception).startswith(want + ":"), f"{name} ran another op: {caught.exception}")
        if not torch.cuda.is_available():
            _skip(self, "no CUDA device visible to torch (the CPU refusals passed)")
        x = torch.randn(4099, device="cuda")

        def err(got, expected):
            # test_ops.py's measure for float32: max error over max(1, max |reference|).
            return (got - expected).abs().max().item() / max(1.0, expected.abs().max().item())

        for name, got, expected in [
            ("ferrocuda::gelu", calls["ferrocuda::gelu"](x), F.gelu(x, approximate="tanh")),
            ("ferrocuda_torch.gelu", calls["ferrocuda_torch.gelu"](x), F.gelu(x, approximate="tanh")),
            ("g23l1::gelu", calls["g23l1::gelu"](x), 3 * x),
            ("g23r_op.gelu", g23r_op.gelu(x), 3 * x),
        ]:
            self.assertLessEqual(err(got, expected), 1e-4, f"{name} computed something else: another op ran")


if __name__ == "__main__":
    unittest.main()
