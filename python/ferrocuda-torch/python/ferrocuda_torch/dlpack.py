"""The DLPack functions: float32 arrays of any DLPack producer (torch tensors, NumPy arrays),
written into a preallocated output; CUDA arrays run on torch's current stream, host arrays on
ferrocuda's CPU executor. Refused inside a CUDA graph capture (use the ops of the package for
that)."""

from . import _C

saxpy = _C.dlpack_saxpy
rms_norm = _C.dlpack_rms_norm
softmax = _C.dlpack_softmax
last_launch = _C.last_launch
