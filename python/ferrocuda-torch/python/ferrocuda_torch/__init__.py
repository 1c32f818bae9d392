"""ferrocuda kernels (Rust compiled to PTX) as PyTorch ops.

With torch installed, importing this package registers the library's kernels as
``torch.ops.ferrocuda.*`` custom ops (bf16, f16, f32 CUDA tensors; autograd; fake
implementations for ``torch.compile``; usable inside ``torch.cuda.graph``) and exports them
as functions: :func:`rmsnorm`, :func:`layernorm`, :func:`softmax`, :func:`cross_entropy`,
:func:`gelu`, :func:`silu_and_mul`, :func:`rotary`, :func:`adamw_`, :func:`attention`, and the
residual add fused with the norms, :func:`add_rmsnorm` and :func:`add_layernorm`.

:mod:`ferrocuda_torch.dlpack` holds the first three toy functions, which take any DLPack array
(NumPy arrays on the CPU executor too) and need no torch; :func:`dlpack_pending` and
:func:`dlpack_release_pending` count and release the arrays they hold until their GPU work has
completed.
"""

from . import _C
from . import dlpack

last_launch = _C.last_launch
dlpack_pending = dlpack.pending
dlpack_release_pending = dlpack.release_pending

try:
    import torch as _torch  # noqa: F401
except ImportError:  # NumPy-only use: the DLPack functions work, the ops need torch.
    _torch = None

if _torch is not None:
    from .ops import (  # noqa: F401
        adamw_,
        add_layernorm,
        add_rmsnorm,
        attention,
        cross_entropy,
        gelu,
        layernorm,
        rmsnorm,
        rotary,
        rotary_tables,
        silu_and_mul,
        softmax,
    )
