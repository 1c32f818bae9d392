"""The ops' registration, without a GPU: schemas, fake implementations (meta tensors), a
torch.compile trace with no graph break, and the refusal of CPU tensors. Runs wherever torch
is installed (skipped, with the reason, where it is not: CI)."""

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (the GPU machines have it)")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

import ferrocuda_torch as ft  # noqa: E402

OPS = [
    "rmsnorm",
    "rmsnorm_backward",
    "add_rmsnorm",
    "add_rmsnorm_backward",
    "layernorm",
    "layernorm_backward",
    "add_layernorm",
    "add_layernorm_backward",
    "softmax",
    "cross_entropy",
    "cross_entropy_backward",
    "gelu",
    "gelu_backward",
    "silu_and_mul",
    "silu_and_mul_backward",
    "rotary",
    "adamw_",
    "attention",
    "attention_backward",
]


def meta(*shape, dtype=torch.bfloat16):
    return torch.empty(*shape, device="meta", dtype=dtype)


def test_every_op_is_registered_in_the_ferrocuda_namespace():
    for name in OPS:
        assert str(getattr(torch.ops.ferrocuda, name).default._schema).startswith(f"ferrocuda::{name}(")
    schema = str(torch.ops.ferrocuda.adamw_.default._schema)
    assert "Tensor(a0!) params" in schema and "Tensor(a2!) m" in schema and "Tensor(a3!) v" in schema, schema


def test_the_fake_implementations_give_the_kernels_output_shapes():
    out, rstd = torch.ops.ferrocuda.rmsnorm(meta(4, 7, 256), meta(256), 1e-6)
    assert out.shape == (4, 7, 256) and rstd.shape == (4, 7) and rstd.dtype == torch.float32
    out, mean, rstd = torch.ops.ferrocuda.layernorm(meta(3, 64), meta(64), meta(64), 1e-5)
    assert out.shape == (3, 64) and mean.shape == rstd.shape == (3,)
    out, total, rstd = torch.ops.ferrocuda.add_rmsnorm(meta(4, 7, 256), meta(4, 7, 256), meta(256), 1e-6)
    assert out.shape == total.shape == (4, 7, 256) and total.dtype == torch.bfloat16 and rstd.shape == (4, 7) and rstd.dtype == torch.float32
    out, total, mean, rstd = torch.ops.ferrocuda.add_layernorm(meta(3, 64), meta(3, 64), meta(64), meta(64), 1e-5)
    assert out.shape == total.shape == (3, 64) and mean.shape == rstd.shape == (3,)
    dsum, dweight, dbias = torch.ops.ferrocuda.add_layernorm_backward(
        meta(3, 64), meta(3, 64), meta(3, 64), meta(64), meta(3, dtype=torch.float32), meta(3, dtype=torch.float32)
    )
    assert dsum.shape == (3, 64) and dweight.shape == dbias.shape == (64,) and dweight.dtype == torch.float32
    assert torch.ops.ferrocuda.silu_and_mul(meta(5, 512)).shape == (5, 256)
    losses, lse = torch.ops.ferrocuda.cross_entropy(meta(8, 1000), meta(8, dtype=torch.int64), -100)
    assert losses.shape == lse.shape == (8,) and losses.dtype == lse.dtype == torch.float32
    dlogits = torch.ops.ferrocuda.cross_entropy_backward(
        meta(8, 1000), meta(8, dtype=torch.int64), meta(8, dtype=torch.float32), meta(8, dtype=torch.float32), -100
    )
    assert dlogits.shape == (8, 1000) and dlogits.dtype == torch.bfloat16
    out, lse = torch.ops.ferrocuda.attention(meta(2, 8, 128, 64), meta(2, 2, 128, 64), meta(2, 2, 128, 64), True)
    assert out.shape == (2, 8, 128, 64) and lse.shape == (2, 8, 128) and lse.dtype == torch.float32
    dq, dk, dv = torch.ops.ferrocuda.attention_backward(
        meta(2, 8, 128, 64), meta(2, 2, 128, 64), meta(2, 2, 128, 64), meta(2, 8, 128, 64), meta(2, 8, 128, 64), meta(2, 8, 128, dtype=torch.float32), True
    )
    assert dq.shape == (2, 8, 128, 64) and dk.shape == dv.shape == (2, 2, 128, 64)


def test_a_module_using_the_ops_traces_with_no_graph_break():
    class Block(torch.nn.Module):
        def forward(self, x, w, b):
            h = ft.layernorm(ft.rmsnorm(x, w), w, b)
            h, r = ft.add_rmsnorm(h, x, w)
            h, r = ft.add_layernorm(h, r, w, b)
            q = h.view(2, 4, 64, 64)
            return ft.softmax(ft.gelu(ft.attention(q, q, q, causal=True))) + ft.silu_and_mul(torch.cat([h, h], -1)).view(2, 4, 64, 64)

    args = (meta(2, 64, 256, dtype=torch.float32), meta(256, dtype=torch.float32), meta(256, dtype=torch.float32))
    explanation = torch._dynamo.explain(Block())(*args)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.graph_count == 1


def test_cross_entropy_traces_with_no_graph_break():
    """The loss (the op's two outputs, the mean over the rows that count) in one graph on meta
    tensors, the logits requiring a gradient (the autograd registration on the path)."""
    logits = meta(8, 1000).requires_grad_(True)
    explanation = torch._dynamo.explain(lambda l, t: ft.cross_entropy(l, t))(logits, meta(8, dtype=torch.int64))
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.graph_count == 1


def test_cpu_tensors_are_refused_with_what_to_do():
    with pytest.raises(ValueError, match="`x` is on the CPU.*move it with .cuda"):
        ft.rmsnorm(torch.randn(4, 8), torch.randn(8))
    with pytest.raises(ValueError, match="`q` is on the CPU"):
        ft.attention(*(torch.randn(1, 1, 16, 32) for _ in range(3)))
    with pytest.raises(TypeError, match="`x` must be a torch.Tensor, not list"):
        ft.ops._launchers["softmax"]([1.0])  # the Rust side checks what it is given, past torch's dispatcher


# ------------------------------------------------------------ the generic path, host-only
# `_C._set_host_only(True)` (the overhead benchmark's mode): every op runs its host side on CPU
# tensors (checks, output allocation, autograd) and launches nothing, so the values are
# undefined but the shapes, dtypes and the autograd wiring are what a GPU run gets.


@pytest.fixture
def host_only():
    ft._C._set_host_only(True)
    try:
        yield
    finally:
        ft._C._set_host_only(False)


class OpLog(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def _cases():
    def t(*shape, dtype=torch.bfloat16):
        return torch.randn(*shape).to(dtype).requires_grad_(True)

    cos, sin = torch.randn(32, 32), torch.randn(32, 32)
    return {
        "rmsnorm": (lambda x, w: ft.rmsnorm(x, w), (t(4, 8, 64), t(64)), "rmsnorm_backward"),
        "add_rmsnorm": (lambda x, r, w: sum(o.float().sum() for o in ft.add_rmsnorm(x, r, w)), (t(4, 8, 64), t(4, 8, 64), t(64)), "add_rmsnorm_backward"),
        "layernorm": (lambda x, w, b: ft.layernorm(x, w, b), (t(3, 64), t(64), t(64)), "layernorm_backward"),
        "add_layernorm": (
            lambda x, r, w, b: sum(o.float().sum() for o in ft.add_layernorm(x, r, w, b)),
            (t(3, 64, dtype=torch.float16), t(3, 64, dtype=torch.float16), t(64, dtype=torch.float16), t(64, dtype=torch.float16)),
            "add_layernorm_backward",
        ),
        "gelu": (ft.gelu, (t(4, 100, dtype=torch.float32),), "gelu_backward"),
        "silu_and_mul": (ft.silu_and_mul, (t(4, 128),), "silu_and_mul_backward"),
        "rotary": (lambda x: ft.rotary(x, torch.arange(16).repeat(2, 1), cos, sin), (t(2, 16, 4, 64),), "rotary"),
        "attention": (lambda q, k, v: ft.attention(q, k, v, causal=True), (t(1, 4, 32, 64), t(1, 2, 32, 64), t(1, 2, 32, 64)), "attention_backward"),
    }


@pytest.mark.parametrize("name", list(_cases()))
def test_autograd_calls_the_declared_backward_op_with_gradients_shaped_like_the_inputs(host_only, name):
    f, inputs, backward_op = _cases()[name]
    out = f(*inputs)
    log = OpLog()
    with log:
        out.float().sum().backward()
    assert f"ferrocuda.{backward_op}.default" in log.ops, log.ops
    for x in inputs:
        assert x.grad is not None and x.grad.shape == x.shape and x.grad.dtype == x.dtype, (name, x.shape, x.dtype)


def test_the_fused_norms_return_the_sum_and_give_x_and_residual_one_gradient(host_only_zeros):
    # Zeroed outputs: in host-only mode nothing writes them, and torch.equal on uninitialised
    # memory fails whenever it holds a NaN (session 18's GPU run of the whole suite: it did).
    x, r = torch.randn(5, 32, requires_grad=True), torch.randn(5, 32, requires_grad=True)
    w, b = torch.randn(32, requires_grad=True), torch.randn(32, requires_grad=True)
    out, total, mean, rstd = torch.ops.ferrocuda.add_layernorm(x, r, w, b, 1e-5)
    assert out.shape == total.shape == (5, 32) and mean.shape == rstd.shape == (5,)
    (out.sum() + total.sum()).backward()
    assert x.grad is not None and r.grad is not None and w.grad.shape == b.grad.shape == (32,)
    assert torch.equal(x.grad, r.grad)


def test_the_outputs_come_from_torch_not_from_the_inputs(host_only):
    x, w = torch.randn(4, 64), torch.randn(64)
    out, rstd = torch.ops.ferrocuda.rmsnorm(x, w, 1e-6)
    assert out.data_ptr() not in (x.data_ptr(), w.data_ptr()) and out.is_contiguous() and rstd.dtype == torch.float32
    with pytest.raises(ValueError, match="`x` is not contiguous"):
        torch.ops.ferrocuda.rmsnorm(torch.randn(64, 4).t(), torch.randn(4), 1e-6)
    with pytest.raises(ValueError, match="last dimension of input .* must be even"):
        ft.silu_and_mul(torch.randn(4, 7))


def test_the_declared_dtypes_are_checked_before_the_device():
    x = torch.randn(2, 64)
    with pytest.raises(TypeError, match="`rstd` has dtype torch.bfloat16; this op takes torch.float32"):
        torch.ops.ferrocuda.rmsnorm_backward(x, x, torch.randn(64), torch.ones(2, dtype=torch.bfloat16))
    with pytest.raises(TypeError, match="`x` has dtype torch.int64"):
        ft.softmax(torch.ones(4, 4, dtype=torch.int64))


@pytest.fixture
def host_only_zeros():
    ft._C._set_host_only(True, zero_outputs=True)
    try:
        yield
    finally:
        ft._C._set_host_only(False)


def _opcheck_cases_on_the_cpu():
    def t(*shape, dtype=torch.bfloat16, grad=False):
        return torch.randn(*shape).to(dtype).requires_grad_(grad)

    cos, sin = ft.rotary_tables(32, 64)
    x, rstd, mean = t(4, 8, 256), torch.rand(4, 8) + 0.5, torch.randn(4, 8)
    q = t(1, 2, 64, 64)
    lse = torch.randn(1, 2, 64)
    return {
        "rmsnorm": (t(4, 8, 256, grad=True), t(256, grad=True), 1e-6),
        "rmsnorm_backward": (x, x, t(256), rstd),
        "add_rmsnorm": (t(4, 8, 256, grad=True), t(4, 8, 256, grad=True), t(256, grad=True), 1e-6),
        "add_rmsnorm_backward": (x, x, x, t(256), rstd),
        "layernorm": (t(4, 8, 256, grad=True), t(256, grad=True), t(256, grad=True), 1e-5),
        "layernorm_backward": (x, x, t(256), mean, rstd),
        "add_layernorm": (t(4, 8, 256, grad=True), t(4, 8, 256, grad=True), t(256, grad=True), t(256, grad=True), 1e-5),
        "add_layernorm_backward": (x, x, x, t(256), mean, rstd),
        "softmax": (t(4, 8, 256, grad=True),),
        "cross_entropy": (t(16, 300, grad=True), torch.randint(0, 300, (16,)), -100),
        "cross_entropy_backward": (t(16, 300), torch.randint(0, 300, (16,)), torch.randn(16), torch.randn(16), -100),
        "gelu": (t(4, 1000, grad=True),),
        "gelu_backward": (t(4, 1000), t(4, 1000)),
        "silu_and_mul": (t(4, 512, grad=True),),
        "silu_and_mul_backward": (t(4, 512), t(4, 256)),
        "rotary": (t(2, 16, 4, 64, grad=True), torch.arange(16).repeat(2, 1), cos, sin, False),
        "adamw_": (t(1000), t(1000), torch.zeros(1000), torch.zeros(1000), 1e-3, 0.9, 0.999, 1e-8, 0.01, 1, 1.0),
        "attention": (t(1, 2, 64, 64, grad=True), t(1, 2, 64, 64, grad=True), t(1, 2, 64, 64, grad=True), True),
        "attention_backward": (q, q, q, q, t(1, 2, 64, 64), lse, True),
    }


@pytest.mark.parametrize("name", OPS)
def test_opcheck_passes_for_every_op_on_the_host_side(host_only_zeros, name):
    """torch.library.opcheck (schema, autograd registration, fake tensors, AOT dispatch with
    dynamic shapes) on the host side of every op: the registration, the fake implementations
    against the real allocations, the autograd wiring. The GPU run's opcheck adds the values."""
    torch.library.opcheck(getattr(torch.ops.ferrocuda, name).default, _opcheck_cases_on_the_cpu()[name])


def test_the_public_functions_track_gradients_only_where_needed(host_only):
    """Without a gradient to track, the public functions call the op below autograd (a
    shortcut of torch's own no-grad path); the results must be the same as through it."""
    x, w = torch.randn(4, 64, requires_grad=True), torch.randn(64)
    out = ft.rmsnorm(x, w)
    assert out.requires_grad and "ferrocuda_rmsnorm" in type(out.grad_fn).__name__
    with torch.no_grad():
        assert not ft.rmsnorm(x, w).requires_grad
    assert not ft.rmsnorm(x.detach(), w).requires_grad
    out, total = ft.add_rmsnorm(x.detach(), x, w)
    assert out.requires_grad and total.requires_grad
    p, m, v = torch.randn(10), torch.zeros(10), torch.zeros(10)
    version = p._version
    ft.adamw_(p, torch.randn(10), m, v, lr=1e-3, step=1)
    assert p._version > version, "the in-place op still bumps the version counter of what it writes"
