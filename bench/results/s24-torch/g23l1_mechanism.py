"""G23L-1's mechanism, on the CPU, with one extension: what a second extension built on
ferrocuda-torch (before session 24) did at its import, done by hand. Its copy of the glue ran
`PyModule::from_code(register.py, "ferrocuda_torch_register")`, i.e. PyImport_ExecCodeModuleEx,
which runs the code in the module of that name already in sys.modules; the re-run's
`_LIBRARIES = {}` drops the Library objects of the ops registered before, torch unregisters them,
and the handles taken earlier (ferrocuda_torch.ops keeps torch.ops.ferrocuda.gelu.default) point
at freed dispatcher entries, which the next ops registered may take over.

    PYTHONPATH=<unpacked ferrocuda_torch wheel> python g23l1_mechanism.py

Prints what ferrocuda_torch.gelu does on a CPU tensor (its own op refuses it, naming itself)
before and after.
"""

import importlib.util
import sys

import torch

import ferrocuda_torch as ft


def gelu_on_cpu():
    try:
        ft.gelu(torch.ones(8))
    except Exception as error:  # noqa: BLE001 (any error: which op raised it is the point)
        return f"{type(error).__name__}: {str(error).splitlines()[0][:150]}"
    return "returned (no refusal)"


print("registrar in sys.modules:", "ferrocuda_torch_register" in sys.modules)
print("before:", gelu_on_cpu())
# The registrar's code as a second copy would run it: the embedded register.py is the one in the
# source tree (the wheel does not ship it), so take it from there.
code = open(sys.argv[1]).read() if len(sys.argv) > 1 else None
if code is None:
    raise SystemExit("usage: g23l1_mechanism.py path/to/register.py")
module = sys.modules.get("ferrocuda_torch_register")
if module is not None:
    exec(compile(code, "ferrocuda_torch_register.py", "exec"), module.__dict__)  # what from_code does to it
else:
    import types

    module = types.ModuleType("ferrocuda_torch_register")
    exec(compile(code, "ferrocuda_torch_register.py", "exec"), module.__dict__)
    sys.modules["ferrocuda_torch_register"] = module
# The second extension's op, registered through that module (as g23r_op's scale_add_scratch was).
lib = torch.library.Library("g23l1_demo", "DEF")
lib.define("scale_add_scratch(Tensor x, Tensor y, float alpha) -> Tensor")
lib.impl("scale_add_scratch", lambda x, y, a: x * a + y, "CPU")
print("after a second registrar run:", gelu_on_cpu())
