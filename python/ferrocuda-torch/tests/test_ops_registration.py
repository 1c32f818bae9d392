"""The ops' registration, without a GPU: schemas, fake implementations (meta tensors), a
torch.compile trace with no graph break, and the refusal of CPU tensors. Runs wherever torch
is installed (skipped, with the reason, where it is not: CI)."""

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (the GPU machines have it)")

import ferrocuda_torch as ft  # noqa: E402

OPS = [
    "rmsnorm",
    "rmsnorm_backward",
    "layernorm",
    "layernorm_backward",
    "softmax",
    "cross_entropy",
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
    assert torch.ops.ferrocuda.silu_and_mul(meta(5, 512)).shape == (5, 256)
    losses, dlogits = torch.ops.ferrocuda.cross_entropy(meta(8, 1000), meta(8, dtype=torch.int64), -100)
    assert losses.shape == (8,) and losses.dtype == torch.float32 and dlogits.shape == (8, 1000)
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
            q = h.view(2, 4, 64, 64)
            return ft.softmax(ft.gelu(ft.attention(q, q, q, causal=True))) + ft.silu_and_mul(torch.cat([h, h], -1)).view(2, 4, 64, 64)

    args = (meta(2, 64, 256, dtype=torch.float32), meta(256, dtype=torch.float32), meta(256, dtype=torch.float32))
    explanation = torch._dynamo.explain(Block())(*args)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.graph_count == 1


def test_cpu_tensors_are_refused_with_what_to_do():
    with pytest.raises(ValueError, match="`x` is on the CPU.*move it with .cuda"):
        ft.rmsnorm(torch.randn(4, 8), torch.randn(8))
    with pytest.raises(ValueError, match="`q` is on the CPU"):
        ft.attention(*(torch.randn(1, 1, 16, 32) for _ in range(3)))
    from ferrocuda_torch import _C

    with pytest.raises(TypeError, match="`x` must be a torch.Tensor, not list"):
        _C.softmax([1.0], torch.empty(1))  # the Rust side checks what it is given
