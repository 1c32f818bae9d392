"""The library's kernels (ferrocuda-kernels) as torch.library custom ops, ``torch.ops.ferrocuda.*``.

Every op takes CUDA tensors of one device, float32, bfloat16 or float16 (f32 arithmetic inside),
C-contiguous; anything else is refused with an error that names the argument and says what to
do. The kernel reads and writes the tensors' own memory (nothing copied) on torch's current
stream, so it is ordered with torch's work before and after it by the stream alone, and inside
``torch.cuda.graph`` it is recorded into torch's graph. Outputs and scratch are allocated by
torch (a capture takes them from its private pool).

The ops are declared in Rust, one table entry each (``src/ops.rs``: inputs and their dtypes,
scalars, outputs and their shape rules, the launch, the backward op), and registered here by the
same code that registers a user's own ops (``src/register.py``): the CUDA implementation is the
Rust function itself, the fake implementation (``torch.compile``) follows the shape rules, and
autograd calls the declared backward op (the library's backward kernels). This file adds only
what is made of torch ops (the hooks below: argument conversions, the softmax and cross-entropy
backward) and the public functions.
"""

import sys

import torch
from torch import Tensor

from . import _C

# ---------------------------------------------------------------- hooks (torch-side parts)


def _softmax_setup(ctx, inputs, output):
    ctx.save_for_backward(output)


def _softmax_grad(ctx, dy):
    (y,) = ctx.saved_tensors
    yf, dyf = y.float(), dy.float()
    return (yf * (dyf - (dyf * yf).sum(-1, keepdim=True))).to(y.dtype)


def _cross_entropy_prepare(logits, targets, ignore_index):
    # The kernel takes u32 classes, u32::MAX (-1 as int32) for an ignored row.
    return logits, torch.where(targets == ignore_index, -1, targets).to(torch.int32), ignore_index


def _cross_entropy_backward_prepare(logits, targets, lse, dlosses, ignore_index):
    # As the forward's targets; the losses' gradient as the kernel reads it (f32, one per row:
    # a mean's gradient arrives expanded from one value).
    return logits, torch.where(targets == ignore_index, -1, targets).to(torch.int32), lse, dlosses.float().contiguous(), ignore_index


def _rotary_prepare(x, positions, cos, sin, inverse):
    return x, positions.to(torch.int32), cos, sin, inverse


_HOOKS = {
    "softmax": {"autograd": (_softmax_grad, _softmax_setup)},
    "cross_entropy": {"prepare": _cross_entropy_prepare},
    "cross_entropy_backward": {"prepare": _cross_entropy_backward_prepare},
    "rotary": {"prepare": _rotary_prepare},
}

# Registers every op of the table (src/ops.rs) as torch.ops.ferrocuda.<name>, and as an
# attribute of this module (the launchers' OpOverloadPackets).
_C.register_library(sys.modules[__name__], _HOOKS)

_ops = torch.ops.ferrocuda
_rmsnorm = _ops.rmsnorm.default
_add_rmsnorm = _ops.add_rmsnorm.default
_layernorm = _ops.layernorm.default
_add_layernorm = _ops.add_layernorm.default
_softmax = _ops.softmax.default
_cross_entropy = _ops.cross_entropy.default
_gelu = _ops.gelu.default
_silu_and_mul = _ops.silu_and_mul.default
_rotary = _ops.rotary.default
_adamw = _ops.adamw_.default
_attention = _ops.attention.default

# ---------------------------------------------------------------- the public functions

# When no argument needs a gradient, the public functions call the op below autograd: what the
# op's autograd kernel (torch's register_autograd, a Python function) would do itself after
# finding no gradient to track, without its cost (a Python kernel and a redispatch: about a third
# of a small call's host time, bench/overhead_cpu.py). While torch.compile traces, and where
# torch lacks the private switch, they call the op plainly.
_below_autograd = getattr(torch._C, "_AutoDispatchBelowAutograd", None)
_any_requires_grad = getattr(torch._C, "_any_requires_grad", None)
_grad_enabled = torch.is_grad_enabled
_compiling = torch.compiler.is_compiling


def _run(op, *args):
    if _below_autograd is None or _any_requires_grad is None or _compiling() or (_grad_enabled() and _any_requires_grad(*args)):
        return op(*args)
    with _below_autograd():
        return op(*args)



def rmsnorm(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    """``x / sqrt(mean(x², -1) + eps) * weight`` (``F.rms_norm(x, (n,), weight, eps)``)."""
    return _run(_rmsnorm, x, weight, eps)[0]


def add_rmsnorm(x: Tensor, residual: Tensor, weight: Tensor, eps: float = 1e-6) -> tuple[Tensor, Tensor]:
    """The residual add fused with RMSNorm: ``sum = x + residual`` (rounded to the dtype: the
    residual stream the next layer adds to) and ``out = rmsnorm(sum, weight, eps)``; returns
    ``(out, sum)``. ``x`` and ``residual`` of one shape and dtype; differentiable in both (their
    gradient is the same: that of ``sum``) and in ``weight``."""
    out, total, _ = _run(_add_rmsnorm, x, residual, weight, eps)
    return out, total


def layernorm(x: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> Tensor:
    """``F.layer_norm(x, (n,), weight, bias, eps)`` over the last dimension."""
    return _run(_layernorm, x, weight, bias, eps)[0]


def add_layernorm(x: Tensor, residual: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> tuple[Tensor, Tensor]:
    """The residual add fused with layer norm: ``sum = x + residual`` (rounded to the dtype) and
    ``out = F.layer_norm(sum, (n,), weight, bias, eps)``; returns ``(out, sum)``."""
    out, total, _, _ = _run(_add_layernorm, x, residual, weight, bias, eps)
    return out, total


def softmax(x: Tensor) -> Tensor:
    """``torch.softmax(x, -1)``."""
    return _run(_softmax, x)


def cross_entropy(logits: Tensor, targets: Tensor, ignore_index: int = -100, reduction: str = "mean") -> Tensor:
    """``F.cross_entropy(logits, targets, ignore_index=..., reduction=...)`` for ``logits``
    ``[N, V]`` and int64 ``targets`` ``[N]``, in float32. The forward reads the logits once and
    keeps each row's log-sum-exp (``[N]`` float32); the backward is one fused pass over the
    logits (``(softmax - onehot) * dloss`` per row, in the logits' dtype), with no ``[N, V]``
    tensor kept between the two."""
    losses = _run(_cross_entropy, logits, targets, ignore_index)[0]
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    if reduction == "mean":
        return losses.sum() / (targets != ignore_index).sum()
    raise ValueError(f"cross_entropy: reduction must be 'mean', 'sum' or 'none', not {reduction!r}")


def gelu(x: Tensor) -> Tensor:
    """``F.gelu(x, approximate="tanh")`` (GPT-2's GELU)."""
    return _run(_gelu, x)


def silu_and_mul(input: Tensor) -> Tensor:
    """``F.silu(gate) * up`` for ``input = cat([gate, up], -1)``."""
    return _run(_silu_and_mul, input)


def rotary(x: Tensor, positions: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotary embeddings, rotate-half (GPT-NeoX, Llama): ``x`` ``[..., heads, head_dim]``,
    ``positions`` (int) of shape ``x.shape[:-2]``, ``cos``/``sin`` float32 ``[max_positions,
    rotary_dim // 2]`` (:func:`rotary_tables`). The first ``rotary_dim`` elements of each head
    rotate; the rest are copied. Differentiable in ``x`` only."""
    return _run(_rotary, x, positions, cos, sin, False)


def rotary_tables(max_positions: int, rotary_dim: int, theta: float = 10000.0, device=None) -> tuple[Tensor, Tensor]:
    """``cos`` and ``sin`` of ``p * theta^(-2k / rotary_dim)``, float32 ``[max_positions, rotary_dim // 2]``."""
    k = torch.arange(rotary_dim // 2, dtype=torch.float64, device=device)
    inv = theta ** (-2.0 * k / rotary_dim)
    angles = torch.arange(max_positions, dtype=torch.float64, device=device)[:, None] * inv[None, :]
    return angles.cos().float(), angles.sin().float()


def adamw_(
    params: Tensor,
    grads: Tensor,
    m: Tensor,
    v: Tensor,
    *,
    lr: float,
    step: int,
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-8,
    weight_decay: float = 0.01,
    grad_scale: float = 1.0,
) -> None:
    """One AdamW step in place on ``params`` and its float32 moments ``m``, ``v`` (zero before
    step 1), as ``torch.optim.AdamW`` computes it (``grads`` times ``grad_scale`` first)."""
    _run(_adamw, params, grads, m, v, lr, beta1, beta2, eps, weight_decay, step, grad_scale)


def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = False) -> Tensor:
    """``F.scaled_dot_product_attention(q, k, v, is_causal=causal)`` for ``[batch, heads, seq,
    head_dim]`` tensors (head_dim a multiple of 32 up to 256; ``k``/``v`` may have fewer heads
    than ``q``, a divisor of them: grouped-query attention), scale ``1/sqrt(head_dim)``."""
    return _run(_attention, q, k, v, causal)[0]


__all__ = [
    "adamw_",
    "add_layernorm",
    "add_rmsnorm",
    "attention",
    "cross_entropy",
    "gelu",
    "layernorm",
    "rmsnorm",
    "rotary",
    "rotary_tables",
    "silu_and_mul",
    "softmax",
]
