"""The library's kernels (ferrocuda-kernels) as torch.library custom ops, ``torch.ops.ferrocuda.*``.

Every op takes CUDA tensors of one device, float32, bfloat16 or float16 (f32 arithmetic inside),
C-contiguous; anything else is refused with an error that names the argument and says what to
do. The kernel reads and writes the tensors' own memory (nothing copied) on torch's current
stream, so it is ordered with torch's work before and after it by the stream alone, and inside
``torch.cuda.graph`` it is recorded into torch's graph. Outputs and scratch are allocated here,
with torch (a capture takes them from its private pool); the Rust side allocates nothing.

Autograd goes through the library's backward kernels (``*_backward`` ops); softmax's backward
and the cross-entropy's chain rule are a few torch ops. Each op has a fake implementation, so
``torch.compile(fullgraph=True)`` traces a module that uses them without a graph break.
"""

import torch
from torch import Tensor

from . import _C

_F32 = torch.float32


def _contig_empty(x: Tensor, shape=None, dtype=None) -> Tensor:
    return torch.empty(x.shape if shape is None else shape, dtype=x.dtype if dtype is None else dtype, device=x.device)


# ---------------------------------------------------------------- RMSNorm


@torch.library.custom_op("ferrocuda::rmsnorm", mutates_args=())
def _rmsnorm(x: Tensor, weight: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    out = _contig_empty(x)
    rstd = _contig_empty(x, x.shape[:-1], _F32)
    _C.rmsnorm(x, weight, out, rstd, eps)
    return out, rstd


@_rmsnorm.register_fake
def _(x, weight, eps):
    return _contig_empty(x), _contig_empty(x, x.shape[:-1], _F32)


@torch.library.custom_op("ferrocuda::rmsnorm_backward", mutates_args=())
def _rmsnorm_backward(dout: Tensor, x: Tensor, weight: Tensor, rstd: Tensor) -> tuple[Tensor, Tensor]:
    cols = x.shape[-1]
    n = _C.norm_scratch_len(rstd.numel(), cols)
    dx = _contig_empty(x)
    dweight = _contig_empty(x, (cols,), _F32)
    s1, s2 = _contig_empty(x, (n,), _F32), _contig_empty(x, (n,), _F32)
    _C.rmsnorm_backward(dout, x, weight, rstd, dx, dweight, s1, s2)
    return dx, dweight


@_rmsnorm_backward.register_fake
def _(dout, x, weight, rstd):
    return _contig_empty(x), _contig_empty(x, (x.shape[-1],), _F32)


def _rmsnorm_setup(ctx, inputs, output):
    x, weight, _ = inputs
    ctx.save_for_backward(x, weight, output[1])


def _rmsnorm_grad(ctx, dout, _drstd):
    x, weight, rstd = ctx.saved_tensors
    dx, dweight = torch.ops.ferrocuda.rmsnorm_backward(dout.contiguous(), x, weight, rstd)
    return dx, dweight.to(weight.dtype), None


_rmsnorm.register_autograd(_rmsnorm_grad, setup_context=_rmsnorm_setup)


def rmsnorm(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    """``x / sqrt(mean(x², -1) + eps) * weight`` (``F.rms_norm(x, (n,), weight, eps)``)."""
    return torch.ops.ferrocuda.rmsnorm(x, weight, eps)[0]


# ---------------------------------------------------------------- LayerNorm


@torch.library.custom_op("ferrocuda::layernorm", mutates_args=())
def _layernorm(x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    out = _contig_empty(x)
    mean = _contig_empty(x, x.shape[:-1], _F32)
    rstd = _contig_empty(x, x.shape[:-1], _F32)
    _C.layernorm(x, weight, bias, out, mean, rstd, eps)
    return out, mean, rstd


@_layernorm.register_fake
def _(x, weight, bias, eps):
    return _contig_empty(x), _contig_empty(x, x.shape[:-1], _F32), _contig_empty(x, x.shape[:-1], _F32)


@torch.library.custom_op("ferrocuda::layernorm_backward", mutates_args=())
def _layernorm_backward(dout: Tensor, x: Tensor, weight: Tensor, mean: Tensor, rstd: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    cols = x.shape[-1]
    n = _C.norm_scratch_len(rstd.numel(), cols)
    dx = _contig_empty(x)
    dweight = _contig_empty(x, (cols,), _F32)
    dbias = _contig_empty(x, (cols,), _F32)
    s1, s2 = _contig_empty(x, (n,), _F32), _contig_empty(x, (n,), _F32)
    _C.layernorm_backward(dout, x, weight, mean, rstd, dx, dweight, dbias, s1, s2)
    return dx, dweight, dbias


@_layernorm_backward.register_fake
def _(dout, x, weight, mean, rstd):
    cols = x.shape[-1]
    return _contig_empty(x), _contig_empty(x, (cols,), _F32), _contig_empty(x, (cols,), _F32)


def _layernorm_setup(ctx, inputs, output):
    x, weight, _, _ = inputs
    ctx.save_for_backward(x, weight, output[1], output[2])


def _layernorm_grad(ctx, dout, _dmean, _drstd):
    x, weight, mean, rstd = ctx.saved_tensors
    dx, dweight, dbias = torch.ops.ferrocuda.layernorm_backward(dout.contiguous(), x, weight, mean, rstd)
    return dx, dweight.to(weight.dtype), dbias.to(weight.dtype), None


_layernorm.register_autograd(_layernorm_grad, setup_context=_layernorm_setup)


def layernorm(x: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> Tensor:
    """``F.layer_norm(x, (n,), weight, bias, eps)`` over the last dimension."""
    return torch.ops.ferrocuda.layernorm(x, weight, bias, eps)[0]


# ---------------------------------------------------------------- softmax


@torch.library.custom_op("ferrocuda::softmax", mutates_args=())
def _softmax(x: Tensor) -> Tensor:
    out = _contig_empty(x)
    _C.softmax(x, out)
    return out


@_softmax.register_fake
def _(x):
    return _contig_empty(x)


def _softmax_setup(ctx, inputs, output):
    ctx.save_for_backward(output)


def _softmax_grad(ctx, dy):
    (y,) = ctx.saved_tensors
    yf, dyf = y.float(), dy.float()
    return (yf * (dyf - (dyf * yf).sum(-1, keepdim=True))).to(y.dtype)


_softmax.register_autograd(_softmax_grad, setup_context=_softmax_setup)


def softmax(x: Tensor) -> Tensor:
    """``torch.softmax(x, -1)``."""
    return torch.ops.ferrocuda.softmax(x)


# ---------------------------------------------------------------- cross-entropy


@torch.library.custom_op("ferrocuda::cross_entropy", mutates_args=())
def _cross_entropy(logits: Tensor, targets: Tensor, ignore_index: int) -> tuple[Tensor, Tensor]:
    # The kernel takes u32 classes, u32::MAX (-1 as int32) for an ignored row.
    t = torch.where(targets == ignore_index, -1, targets).to(torch.int32)
    losses = _contig_empty(logits, logits.shape[:-1], _F32)
    dlogits = _contig_empty(logits)
    _C.cross_entropy(logits, t, losses, dlogits, 1.0)
    return losses, dlogits


@_cross_entropy.register_fake
def _(logits, targets, ignore_index):
    return _contig_empty(logits, logits.shape[:-1], _F32), _contig_empty(logits)


def _cross_entropy_setup(ctx, inputs, output):
    ctx.save_for_backward(output[1])


def _cross_entropy_grad(ctx, dlosses, _ddlogits):
    (dlogits,) = ctx.saved_tensors
    # One pass over the [N, V] gradient in its own dtype (the per-row factor rounded to it).
    return dlogits * dlosses.unsqueeze(-1).to(dlogits.dtype), None, None


_cross_entropy.register_autograd(_cross_entropy_grad, setup_context=_cross_entropy_setup)


def cross_entropy(logits: Tensor, targets: Tensor, ignore_index: int = -100, reduction: str = "mean") -> Tensor:
    """``F.cross_entropy(logits, targets, ignore_index=..., reduction=...)`` for ``logits``
    ``[N, V]`` and int64 ``targets`` ``[N]``, in float32. The gradient is computed in the
    forward pass (llm.c's fused classifier) and kept until the backward: one ``[N, V]`` tensor of
    the logits' dtype."""
    losses = torch.ops.ferrocuda.cross_entropy(logits, targets, ignore_index)[0]
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    if reduction == "mean":
        return losses.sum() / (targets != ignore_index).sum()
    raise ValueError(f"cross_entropy: reduction must be 'mean', 'sum' or 'none', not {reduction!r}")


# ---------------------------------------------------------------- GELU (tanh)


@torch.library.custom_op("ferrocuda::gelu", mutates_args=())
def _gelu(x: Tensor) -> Tensor:
    out = _contig_empty(x)
    _C.gelu(x, out)
    return out


@_gelu.register_fake
def _(x):
    return _contig_empty(x)


@torch.library.custom_op("ferrocuda::gelu_backward", mutates_args=())
def _gelu_backward(x: Tensor, dout: Tensor) -> Tensor:
    dx = _contig_empty(x)
    _C.gelu_backward(x, dout, dx)
    return dx


@_gelu_backward.register_fake
def _(x, dout):
    return _contig_empty(x)


def _gelu_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _gelu_grad(ctx, dout):
    (x,) = ctx.saved_tensors
    return torch.ops.ferrocuda.gelu_backward(x, dout.contiguous())


_gelu.register_autograd(_gelu_grad, setup_context=_gelu_setup)


def gelu(x: Tensor) -> Tensor:
    """``F.gelu(x, approximate="tanh")`` (GPT-2's GELU)."""
    return torch.ops.ferrocuda.gelu(x)


# ---------------------------------------------------------------- SiLU-and-mul (SwiGLU)


@torch.library.custom_op("ferrocuda::silu_and_mul", mutates_args=())
def _silu_and_mul(input: Tensor) -> Tensor:
    if input.dim() == 0 or input.shape[-1] % 2:
        raise ValueError(f"ferrocuda::silu_and_mul: the last dimension of input (shape {tuple(input.shape)}) must be even: [gate, up]")
    out = _contig_empty(input, (*input.shape[:-1], input.shape[-1] // 2))
    _C.silu_and_mul(input, out)
    return out


@_silu_and_mul.register_fake
def _(input):
    return _contig_empty(input, (*input.shape[:-1], input.shape[-1] // 2))


@torch.library.custom_op("ferrocuda::silu_and_mul_backward", mutates_args=())
def _silu_and_mul_backward(input: Tensor, dout: Tensor) -> Tensor:
    dinput = _contig_empty(input)
    _C.silu_and_mul_backward(input, dout, dinput)
    return dinput


@_silu_and_mul_backward.register_fake
def _(input, dout):
    return _contig_empty(input)


def _silu_and_mul_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _silu_and_mul_grad(ctx, dout):
    (input,) = ctx.saved_tensors
    return torch.ops.ferrocuda.silu_and_mul_backward(input, dout.contiguous())


_silu_and_mul.register_autograd(_silu_and_mul_grad, setup_context=_silu_and_mul_setup)


def silu_and_mul(input: Tensor) -> Tensor:
    """``F.silu(gate) * up`` for ``input = cat([gate, up], -1)``."""
    return torch.ops.ferrocuda.silu_and_mul(input)


# ---------------------------------------------------------------- rotary embeddings


@torch.library.custom_op("ferrocuda::rotary", mutates_args=())
def _rotary(x: Tensor, positions: Tensor, cos: Tensor, sin: Tensor, inverse: bool) -> Tensor:
    out = _contig_empty(x)
    _C.rotary(x, positions.to(torch.int32), cos, sin, out, inverse)
    return out


@_rotary.register_fake
def _(x, positions, cos, sin, inverse):
    return _contig_empty(x)


def _rotary_setup(ctx, inputs, output):
    _, positions, cos, sin, inverse = inputs
    ctx.save_for_backward(positions, cos, sin)
    ctx.inverse = inverse


def _rotary_grad(ctx, dout):
    positions, cos, sin = ctx.saved_tensors
    return torch.ops.ferrocuda.rotary(dout.contiguous(), positions, cos, sin, not ctx.inverse), None, None, None, None


_rotary.register_autograd(_rotary_grad, setup_context=_rotary_setup)


def rotary(x: Tensor, positions: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotary embeddings, rotate-half (GPT-NeoX, Llama): ``x`` ``[..., heads, head_dim]``,
    ``positions`` (int) of shape ``x.shape[:-2]``, ``cos``/``sin`` float32 ``[max_positions,
    rotary_dim // 2]`` (:func:`rotary_tables`). The first ``rotary_dim`` elements of each head
    rotate; the rest are copied. Differentiable in ``x`` only."""
    return torch.ops.ferrocuda.rotary(x, positions, cos, sin, False)


def rotary_tables(max_positions: int, rotary_dim: int, theta: float = 10000.0, device=None) -> tuple[Tensor, Tensor]:
    """``cos`` and ``sin`` of ``p * theta^(-2k / rotary_dim)``, float32 ``[max_positions, rotary_dim // 2]``."""
    k = torch.arange(rotary_dim // 2, dtype=torch.float64, device=device)
    inv = theta ** (-2.0 * k / rotary_dim)
    angles = torch.arange(max_positions, dtype=torch.float64, device=device)[:, None] * inv[None, :]
    return angles.cos().float(), angles.sin().float()


# ---------------------------------------------------------------- AdamW


@torch.library.custom_op("ferrocuda::adamw_", mutates_args=("params", "m", "v"))
def _adamw(
    params: Tensor, grads: Tensor, m: Tensor, v: Tensor, lr: float, beta1: float, beta2: float, eps: float, weight_decay: float, step: int, grad_scale: float
) -> None:
    if step < 1:
        raise ValueError(f"ferrocuda::adamw_: step counts from 1, got {step}")
    _C.adamw(params, grads, m, v, lr, beta1, beta2, eps, weight_decay, step, grad_scale)


@_adamw.register_fake
def _(params, grads, m, v, lr, beta1, beta2, eps, weight_decay, step, grad_scale):
    return None


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
    torch.ops.ferrocuda.adamw_(params, grads, m, v, lr, beta1, beta2, eps, weight_decay, step, grad_scale)


# ---------------------------------------------------------------- attention


@torch.library.custom_op("ferrocuda::attention", mutates_args=())
def _attention(q: Tensor, k: Tensor, v: Tensor, causal: bool) -> tuple[Tensor, Tensor]:
    out = _contig_empty(q)
    lse = _contig_empty(q, q.shape[:-1], _F32)
    _C.attention_forward(q, k, v, out, lse, causal)
    return out, lse


@_attention.register_fake
def _(q, k, v, causal):
    return _contig_empty(q), _contig_empty(q, q.shape[:-1], _F32)


@torch.library.custom_op("ferrocuda::attention_backward", mutates_args=())
def _attention_backward(q: Tensor, k: Tensor, v: Tensor, out: Tensor, dout: Tensor, lse: Tensor, causal: bool) -> tuple[Tensor, Tensor, Tensor]:
    if q.dim() != 4 or k.dim() != 4:
        raise ValueError(f"ferrocuda::attention_backward: q {tuple(q.shape)} and k {tuple(k.shape)} must be [batch, heads, seq, head_dim]")
    b, hq, sq, d = q.shape
    hkv, skv = k.shape[1], k.shape[2]
    scratch = _contig_empty(q, (_C.attention_scratch_len(b, hq, hkv, sq, skv, d, causal),), _F32)
    dq, dk, dv = _contig_empty(q), _contig_empty(k), _contig_empty(v)
    _C.attention_backward(q, k, v, out, dout, lse, dq, dk, dv, scratch, causal)
    return dq, dk, dv


@_attention_backward.register_fake
def _(q, k, v, out, dout, lse, causal):
    return _contig_empty(q), _contig_empty(k), _contig_empty(v)


def _attention_setup(ctx, inputs, output):
    q, k, v, causal = inputs
    ctx.save_for_backward(q, k, v, output[0], output[1])
    ctx.causal = causal


def _attention_grad(ctx, dout, _dlse):
    q, k, v, out, lse = ctx.saved_tensors
    dq, dk, dv = torch.ops.ferrocuda.attention_backward(q, k, v, out, dout.contiguous(), lse, ctx.causal)
    return dq, dk, dv, None


_attention.register_autograd(_attention_grad, setup_context=_attention_setup)


def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = False) -> Tensor:
    """``F.scaled_dot_product_attention(q, k, v, is_causal=causal)`` for ``[batch, heads, seq,
    head_dim]`` tensors (head_dim a multiple of 32 up to 256; ``k``/``v`` may have fewer heads
    than ``q``, a divisor of them: grouped-query attention), scale ``1/sqrt(head_dim)``."""
    return torch.ops.ferrocuda.attention(q, k, v, causal)[0]


__all__ = [
    "adamw_",
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
