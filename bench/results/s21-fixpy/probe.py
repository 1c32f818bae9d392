"""Facts about torch's objects that the G21R-2 checks rely on (printed, not asserted)."""
import sys

import torch

HEAP = 1 << 9
IMMUTABLE = 1 << 8


def flags(t):
    f = t.__flags__
    return f"heap={bool(f & HEAP)} immutable={bool(f & IMMUTABLE)}"


for name in ("TensorBase", "DisableTorchFunction", "_DisableTorchDispatch", "_CudaStreamBase"):
    t = getattr(torch._C, name, None)
    if t is None:
        print(name, "missing")
        continue
    print(name, t, flags(t), "metatype", type(t), flags(type(t)), "module", t.__module__)
d = torch._C._DisableTorchDispatch.__dict__
for m in ("__enter__", "__exit__", "__init__"):
    w = d.get(m)
    print(m, type(w), type(getattr(w, "__func__", None)), repr(getattr(getattr(w, "__func__", None), "__doc__", None))[:120])
print("data_ptr", type(torch._C.TensorBase.__dict__["data_ptr"]), "is_cuda", type(torch._C.TensorBase.__dict__["is_cuda"]))
print("_cuda_getCurrentRawStream", type(torch._C._cuda_getCurrentRawStream), type(torch._C._cuda_getCurrentRawStream.__self__))
print("current_stream type mro", [c.__name__ for c in type(torch.cuda.current_stream()).__mro__])
try:
    torch._C.TensorBase.data_ptr = lambda self: 0
    print("TensorBase is MUTABLE")
except TypeError as e:
    print("TensorBase immutable:", e)
try:
    torch._C._DisableTorchDispatch.__enter__ = torch._C._DisableTorchDispatch.__dict__["__enter__"]
    print("_DisableTorchDispatch attributes can be set")
except TypeError as e:
    print("_DisableTorchDispatch immutable:", e)
