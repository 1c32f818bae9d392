"""G21R-2 with PyTorch installed (not run in session 21: no torch on the review machine, and the
one GPU call went to G21R-1). The same class as repro_fake_torch.py, with the real torch: the
first DLPack call after `torch._C.TensorBase` is reassigned caches the stand-in's methods as
"torch's C methods" for the rest of the process; the attribute is put back at once, torch
keeps working, and every later call trusts the stand-in's `data_ptr` and `numel`.

usage: python3 repro_real_torch.py
"""
import numpy as np
import torch

from ferrocuda_torch import dlpack as ft


class Base:
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


real = torch._C.TensorBase
torch._C.TensorBase = Base
try:
    ft.saxpy(1.0, np.zeros(1, np.float32), np.zeros(1, np.float32))  # the first call caches "torch's" API
finally:
    torch._C.TensorBase = real

secret = b"password=hunter2-and-more-bytes!"
y = np.zeros(8, dtype=np.float32)
ft.saxpy(1.0, Base(id(secret) + 32, 8), y)
print("leak:", y.tobytes())
print("real torch tensors still work:", torch.ones(3) + 1)
ft.saxpy(1.0, Base(0x1000, 1 << 20), np.zeros(1 << 20, np.float32))  # SIGSEGV on the CPU path
