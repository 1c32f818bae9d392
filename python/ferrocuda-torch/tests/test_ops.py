"""The library's ops as torch.library custom ops, on a GPU: results and gradients against
torch's own ops, torch.library.opcheck, torch.compile(fullgraph=True), torch.cuda.graph capture
and replay with new inputs, zero-copy on torch's current stream, and the refusals.

Skipped (with the reason printed) without torch or a CUDA device; under REQUIRE_GPU=1 those
are failures instead.

Tolerances (stated, checked): the largest absolute error divided by max(1, the largest
absolute value of the reference) is at most 1e-4 for float32, 5e-3 for float16 and 3e-2 for
bfloat16 (about 3 units in the last place of bf16's 8-bit mantissa), with the reference
computed in float32 by torch from the same (rounded) inputs. Attention in float32 is held to
2e-4 (its f32 arithmetic sums in another order than cuDNN/FlashAttention's).
"""

import os

import pytest

REQUIRE = os.environ.get("REQUIRE_GPU") == "1"
torch = __import__("torch") if REQUIRE else pytest.importorskip("torch", reason="torch is not installed (the GPU machines have it)")
if not torch.cuda.is_available():
    if REQUIRE:
        raise RuntimeError("REQUIRE_GPU=1 but torch sees no CUDA device")
    pytest.skip("no CUDA device: the ops run on CUDA tensors", allow_module_level=True)

import torch.nn.functional as F  # noqa: E402

import ferrocuda_torch as ft  # noqa: E402

DEV = "cuda"
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
TOL = {torch.float32: 1e-4, torch.float16: 5e-3, torch.bfloat16: 3e-2}


def close(ours, ref, dtype, tol=None, what=""):
    tol = TOL[dtype] if tol is None else tol
    ours, ref = ours.float(), ref.float()
    assert ours.shape == ref.shape, (what, ours.shape, ref.shape)
    err = (ours - ref).abs().max().item() / max(1.0, ref.abs().max().item())
    assert err <= tol, f"{what}: relative max error {err:.3g} > {tol:g} ({dtype})"


def leaf(t):
    return t.detach().clone().requires_grad_(True)


def grads_of(f, inputs, dout):
    """Runs f on leaves of `inputs`, backpropagates dout, returns (output, grads)."""
    leaves = [leaf(x) for x in inputs]
    out = f(*leaves)
    out.backward(dout)
    return out.detach(), [x.grad for x in leaves]


def ref32(inputs):
    return [x.detach().float() for x in inputs]


# ------------------------------------------------------------ results and gradients


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(3, 31), (4, 5, 768), (64, 4096)])
def test_rmsnorm_and_its_gradients_match_torch(dtype, shape):
    x = torch.randn(shape, device=DEV).to(dtype)
    w = (1 + 0.1 * torch.randn(shape[-1], device=DEV)).to(dtype)
    dout = torch.randn(shape, device=DEV).to(dtype)
    out, (dx, dw) = grads_of(lambda x, w: ft.rmsnorm(x, w, 1e-6), [x, w], dout)
    rout, (rdx, rdw) = grads_of(lambda x, w: F.rms_norm(x, (shape[-1],), w, 1e-6), ref32([x, w]), dout.float())
    close(out, rout, dtype, what="out")
    close(dx, rdx, dtype, what="dx")
    close(dw, rdw, dtype, tol=TOL[dtype] * 4, what="dweight (a sum over rows)")
    assert dx.dtype == dtype and dw.dtype == dtype


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(3, 31), (8, 1024)])
def test_layernorm_and_its_gradients_match_torch(dtype, shape):
    x = torch.randn(shape, device=DEV).to(dtype)
    w = (1 + 0.1 * torch.randn(shape[-1], device=DEV)).to(dtype)
    b = (0.1 * torch.randn(shape[-1], device=DEV)).to(dtype)
    dout = torch.randn(shape, device=DEV).to(dtype)
    out, grads = grads_of(lambda x, w, b: ft.layernorm(x, w, b, 1e-5), [x, w, b], dout)
    rout, rgrads = grads_of(lambda x, w, b: F.layer_norm(x, (shape[-1],), w, b, 1e-5), ref32([x, w, b]), dout.float())
    close(out, rout, dtype, what="out")
    for name, g, r in zip(["dx", "dweight", "dbias"], grads, rgrads):
        close(g, r, dtype, tol=TOL[dtype] * 4, what=name)


def _residual_inputs(shape, dtype, bias):
    x = torch.randn(shape, device=DEV).to(dtype)
    r = torch.randn(shape, device=DEV).to(dtype)
    w = (1 + 0.1 * torch.randn(shape[-1], device=DEV)).to(dtype)
    params = [w, (0.1 * torch.randn(shape[-1], device=DEV)).to(dtype)] if bias else [w]
    # Gradients reach both outputs: the normalised one and the residual stream (sum).
    dout, dsum = torch.randn(shape, device=DEV).to(dtype), torch.randn(shape, device=DEV).to(dtype)
    return [x, r, *params], dout, dsum


def _fused_grads(f, inputs, dout, dsum):
    leaves = [leaf(t) for t in inputs]
    out, total = f(*leaves)
    torch.autograd.backward([out, total], [dout, dsum])
    return out.detach(), total.detach(), [t.grad for t in leaves]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(3, 31), (4, 5, 768), (64, 4096)])
def test_add_rmsnorm_and_its_gradients_match_torch(dtype, shape):
    inputs, dout, dsum = _residual_inputs(shape, dtype, bias=False)
    cols = shape[-1]

    def reference(x, r, w):
        # The sum rounded to the dtype first, as the kernel does (the residual stream is stored in it).
        total = (x + r).to(dtype).float() if dtype != torch.float32 else x + r
        return F.rms_norm(total, (cols,), w, 1e-6), total

    out, total, grads = _fused_grads(lambda x, r, w: ft.add_rmsnorm(x, r, w, 1e-6), inputs, dout, dsum)
    rout, rtotal, rgrads = _fused_grads(reference, ref32(inputs), dout.float(), dsum.float())
    close(out, rout, dtype, what="out")
    close(total, rtotal, dtype, what="sum")
    assert out.dtype == total.dtype == dtype
    for name, g, r in zip(["dx", "dresidual", "dweight"], grads, rgrads):
        close(g, r, dtype, tol=TOL[dtype] * (4 if name == "dweight" else 1), what=name)
        assert g.dtype == dtype
    assert torch.equal(grads[0], grads[1]), "x and residual get the gradient of their sum"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(3, 31), (8, 1024)])
def test_add_layernorm_and_its_gradients_match_torch(dtype, shape):
    inputs, dout, dsum = _residual_inputs(shape, dtype, bias=True)
    cols = shape[-1]

    def reference(x, r, w, b):
        total = (x + r).to(dtype).float() if dtype != torch.float32 else x + r
        return F.layer_norm(total, (cols,), w, b, 1e-5), total

    out, total, grads = _fused_grads(lambda x, r, w, b: ft.add_layernorm(x, r, w, b, 1e-5), inputs, dout, dsum)
    rout, rtotal, rgrads = _fused_grads(reference, ref32(inputs), dout.float(), dsum.float())
    close(out, rout, dtype, what="out")
    close(total, rtotal, dtype, what="sum")
    for name, g, r in zip(["dx", "dresidual", "dweight", "dbias"], grads, rgrads):
        close(g, r, dtype, tol=TOL[dtype] * 4, what=name)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(3, 31), (16, 2048)])
def test_softmax_and_its_gradient_match_torch(dtype, shape):
    x = (4 * torch.randn(shape, device=DEV)).to(dtype)
    dout = torch.randn(shape, device=DEV).to(dtype)
    out, (dx,) = grads_of(ft.softmax, [x], dout)
    rout, (rdx,) = grads_of(lambda x: torch.softmax(x, -1), ref32([x]), dout.float())
    close(out, rout, dtype, what="out")
    close(dx, rdx, dtype, what="dx")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cross_entropy_and_its_gradient_match_torch(dtype):
    n, vocab = 64, 1000
    logits = (2 * torch.randn(n, vocab, device=DEV)).to(dtype)
    targets = torch.randint(0, vocab, (n,), device=DEV)
    targets[::7] = -100
    loss, (dlogits,) = grads_of(lambda l: ft.cross_entropy(l, targets), [logits], torch.tensor(1.0, device=DEV))
    rloss, (rdlogits,) = grads_of(lambda l: F.cross_entropy(l, targets), ref32([logits]), torch.tensor(1.0, device=DEV))
    close(loss, rloss, dtype, what="loss")
    close(dlogits, rdlogits, dtype, what="dlogits")
    none = ft.cross_entropy(logits, targets, reduction="none")
    close(none, F.cross_entropy(logits.float(), targets, reduction="none"), dtype, what="per-row losses")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("vocab", [1000, 1001], ids=["vocab%8==0", "vocab%8!=0"])
def test_cross_entropy_backward_takes_each_rows_upstream_gradient(dtype, vocab):
    """The fused backward scales each row by the gradient its loss received (reduction "none"
    with a per-row upstream gradient, and "sum" with a scalar one), for both backward kernels
    (8 columns a thread when the vocabulary is a multiple of 8, one element otherwise)."""
    n = 48
    logits = (2 * torch.randn(n, vocab, device=DEV)).to(dtype)
    targets = torch.randint(0, vocab, (n,), device=DEV)
    targets[::5] = -100
    upstream = torch.randn(n, device=DEV)
    _, (dlogits,) = grads_of(lambda l: ft.cross_entropy(l, targets, reduction="none"), [logits], upstream)
    _, (want,) = grads_of(lambda l: F.cross_entropy(l, targets, reduction="none"), ref32([logits]), upstream)
    close(dlogits, want, dtype, what="dlogits, per-row upstream gradient")
    _, (dlogits,) = grads_of(lambda l: ft.cross_entropy(l, targets, reduction="sum"), [logits], torch.tensor(3.0, device=DEV))
    _, (want,) = grads_of(lambda l: F.cross_entropy(l, targets, reduction="sum"), ref32([logits]), torch.tensor(3.0, device=DEV))
    close(dlogits, want, dtype, what="dlogits, reduction sum")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [1000, 4096])
def test_gelu_and_its_gradient_match_torch(dtype, n):
    x = torch.randn(8, n, device=DEV).to(dtype)
    dout = torch.randn(8, n, device=DEV).to(dtype)
    out, (dx,) = grads_of(ft.gelu, [x], dout)
    rout, (rdx,) = grads_of(lambda x: F.gelu(x, approximate="tanh"), ref32([x]), dout.float())
    close(out, rout, dtype, what="out")
    close(dx, rdx, dtype, what="dx")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_silu_and_mul_and_its_gradient_match_torch(dtype):
    x = torch.randn(4, 7, 2 * 352, device=DEV).to(dtype)
    dout = torch.randn(4, 7, 352, device=DEV).to(dtype)

    def ref(x):
        gate, up = x.chunk(2, dim=-1)
        return F.silu(gate) * up

    out, (dx,) = grads_of(ft.silu_and_mul, [x], dout)
    rout, (rdx,) = grads_of(ref, ref32([x]), dout.float())
    close(out, rout, dtype, what="out")
    close(dx, rdx, dtype, what="dinput")


def rotary_reference(x, positions, cos, sin):
    rd = 2 * cos.shape[1]
    c, s = cos[positions.long()], sin[positions.long()]  # [..., rd/2]
    c, s = c.unsqueeze(-2), s.unsqueeze(-2)  # broadcast over heads
    x1, x2, rest = x[..., : rd // 2], x[..., rd // 2 : rd], x[..., rd:]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s, rest], dim=-1)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("rotary_dim", [64, 32])
def test_rotary_and_its_gradient_match_torch(dtype, rotary_dim):
    b, s, h, d = 2, 33, 4, 64
    x = torch.randn(b, s, h, d, device=DEV).to(dtype)
    positions = torch.arange(s, device=DEV).repeat(b, 1) + 3
    cos, sin = ft.rotary_tables(64, rotary_dim, device=DEV)
    dout = torch.randn(b, s, h, d, device=DEV).to(dtype)
    out, (dx,) = grads_of(lambda x: ft.rotary(x, positions, cos, sin), [x], dout)
    rout, (rdx,) = grads_of(lambda x: rotary_reference(x, positions, cos, sin), ref32([x]), dout.float())
    close(out, rout, dtype, what="out")
    close(dx, rdx, dtype, what="dx")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_adamw_steps_match_torch_optim(dtype):
    torch.manual_seed(0)
    p0 = torch.randn(4096, device=DEV).to(dtype)
    ours, m, v = p0.clone(), torch.zeros(4096, device=DEV), torch.zeros(4096, device=DEV)
    ref = torch.nn.Parameter(p0.float().clone())
    opt = torch.optim.AdamW([ref], lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    for step in range(1, 4):
        g = torch.randn(4096, device=DEV).to(dtype)
        ft.adamw_(ours, g, m, v, lr=1e-2, step=step, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1)
        ref.grad = g.float()
        opt.step()
    close(ours, ref.detach(), dtype, what="params after 3 steps")


ATTN_SHAPES = [
    (2, 4, 4, 128, 64),  # B, Hq, Hkv, S, D
    (1, 8, 2, 96, 128),  # grouped-query heads, S not a multiple of 64
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", ATTN_SHAPES)
def test_attention_and_its_gradients_match_sdpa(dtype, causal, shape):
    b, hq, hkv, s, d = shape
    q = torch.randn(b, hq, s, d, device=DEV).to(dtype)
    k = torch.randn(b, hkv, s, d, device=DEV).to(dtype)
    v = torch.randn(b, hkv, s, d, device=DEV).to(dtype)
    dout = torch.randn(b, hq, s, d, device=DEV).to(dtype)
    out, grads = grads_of(lambda q, k, v: ft.attention(q, k, v, causal), [q, k, v], dout)
    rout, rgrads = grads_of(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=hq != hkv), ref32([q, k, v]), dout.float()
    )
    tol = 2e-4 if dtype == torch.float32 else None
    close(out, rout, dtype, tol=tol, what="out")
    for name, g, r in zip(["dq", "dk", "dv"], grads, rgrads):
        close(g, r, dtype, tol=None if tol is None else tol * 5, what=name)


# ------------------------------------------------------------ opcheck


def _opcheck_cases():
    f = torch.bfloat16

    def t(*shape, dtype=f, grad=False):
        x = torch.randn(*shape, device=DEV).to(dtype)
        return x.requires_grad_(grad)

    cos, sin = ft.rotary_tables(32, 64, device=DEV)
    x = t(4, 8, 256)
    rstd = torch.rand(4, 8, device=DEV) + 0.5
    mean = torch.randn(4, 8, device=DEV)
    q = t(1, 2, 64, 64)
    out, lse = torch.ops.ferrocuda.attention(q, q, q, True)
    return [
        ("rmsnorm", (t(4, 8, 256, grad=True), t(256, grad=True), 1e-6)),
        ("rmsnorm_backward", (x, x, t(256), rstd)),
        ("layernorm", (t(4, 8, 256, grad=True), t(256, grad=True), t(256, grad=True), 1e-5)),
        ("layernorm_backward", (x, x, t(256), mean, rstd)),
        ("add_rmsnorm", (t(4, 8, 256, grad=True), t(4, 8, 256, grad=True), t(256, grad=True), 1e-6)),
        ("add_rmsnorm_backward", (x, x, x, t(256), rstd)),
        ("add_layernorm", (t(4, 8, 256, grad=True), t(4, 8, 256, grad=True), t(256, grad=True), t(256, grad=True), 1e-5)),
        ("add_layernorm_backward", (x, x, x, t(256), mean, rstd)),
        ("softmax", (t(4, 8, 256, grad=True),)),
        ("cross_entropy", (t(16, 300, grad=True), torch.randint(0, 300, (16,), device=DEV), -100)),
        ("cross_entropy_backward", (t(16, 300), torch.randint(0, 300, (16,), device=DEV), torch.randn(16, device=DEV), torch.randn(16, device=DEV), -100)),
        ("gelu", (t(4, 1000, grad=True),)),
        ("gelu_backward", (t(4, 1000), t(4, 1000))),
        ("silu_and_mul", (t(4, 512, grad=True),)),
        ("silu_and_mul_backward", (t(4, 512), t(4, 256))),
        ("rotary", (t(2, 16, 4, 64, grad=True), torch.arange(16, device=DEV).repeat(2, 1), cos, sin, False)),
        ("adamw_", (t(1000), t(1000), torch.zeros(1000, device=DEV), torch.zeros(1000, device=DEV), 1e-3, 0.9, 0.999, 1e-8, 0.01, 1, 1.0)),
        ("attention", (t(1, 2, 64, 64, grad=True), t(1, 2, 64, 64, grad=True), t(1, 2, 64, 64, grad=True), True)),
        ("attention_backward", (q, q, q, out, t(1, 2, 64, 64), lse, True)),
    ]


@pytest.mark.parametrize("case", range(19))
def test_opcheck(case):
    name, args = _opcheck_cases()[case]
    torch.library.opcheck(getattr(torch.ops.ferrocuda, name).default, args)


# ------------------------------------------------------------ streams, zero-copy, refusals


def test_ops_run_zero_copy_on_torchs_current_stream():
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        x = torch.randn(64, 1024, device=DEV)
        w = torch.randn(1024, device=DEV)
        out, rstd = torch.ops.ferrocuda.rmsnorm(x, w, 1e-6)
        stream, addresses = ft.last_launch()
        assert stream == s.cuda_stream != 0
        assert addresses == [x.data_ptr(), w.data_ptr(), out.data_ptr(), rstd.data_ptr()], "a copy was made"
        expected = F.rms_norm(x, (1024,), w, 1e-6)
    s.synchronize()
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


def test_refusals_name_the_argument_and_say_what_to_do():
    x = torch.randn(8, 256, device=DEV)
    w = torch.randn(256, device=DEV)
    with pytest.raises(ValueError, match="`x` is on the CPU.*cuda"):
        ft.rmsnorm(x.cpu(), w.cpu())
    with pytest.raises(ValueError, match="`x` is not contiguous.*contiguous"):
        ft.rmsnorm(x.t(), torch.randn(8, device=DEV))
    with pytest.raises(TypeError, match="`weight` must be torch.float32 here, not torch.bfloat16"):
        ft.rmsnorm(x, w.bfloat16())
    with pytest.raises(TypeError, match="int64"):
        ft.softmax(torch.ones(4, 4, device=DEV, dtype=torch.int64))
    with pytest.raises(RuntimeError, match="weight"):
        ft.rmsnorm(x, torch.randn(255, device=DEV))
    with pytest.raises(RuntimeError, match="head_dim"):
        ft.attention(*(torch.randn(1, 1, 16, 48, device=DEV) for _ in range(3)))
    p = torch.randn(100, device=DEV)
    with pytest.raises(ValueError, match="overlap"):
        ft.adamw_(p, p, torch.zeros(100, device=DEV), torch.zeros(100, device=DEV), lr=1e-3, step=1)


# ------------------------------------------------------------ torch.compile and graph captures (last:
# a failed capture leaves torch's CUDA state unusable for the tests after it)


class Block(torch.nn.Module):
    def __init__(self, d=256, heads=4):
        super().__init__()
        self.heads = heads
        self.norm_w = torch.nn.Parameter(torch.ones(d))
        self.ln_w = torch.nn.Parameter(torch.ones(d))
        self.ln_b = torch.nn.Parameter(torch.zeros(d))
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.up = torch.nn.Linear(d, 4 * d)
        self.down = torch.nn.Linear(2 * d, d)

    def forward(self, x):
        b, s, d = x.shape
        h = ft.rmsnorm(x, self.norm_w)
        q, k, v = self.qkv(h).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4).contiguous().unbind(0)
        a = ft.attention(q, k, v, causal=True).transpose(1, 2).reshape(b, s, d)
        h, x = ft.add_layernorm(a, x, self.ln_w, self.ln_b)  # x + a, then its layer norm
        h, _ = ft.add_rmsnorm(h, torch.zeros_like(h), self.norm_w)
        x = x + self.down(ft.silu_and_mul(ft.gelu(self.up(h))))
        return ft.softmax(x)


def test_torch_compile_fullgraph_has_no_graph_break_and_matches_eager():
    torch.manual_seed(0)
    block = Block().to(DEV)
    x = torch.randn(2, 64, 256, device=DEV, requires_grad=True)
    explanation = torch._dynamo.explain(block)(x)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.graph_count == 1
    compiled = torch.compile(block, fullgraph=True)
    ours = compiled(x)
    eager = block(x)
    # Inductor fuses and orders torch's own ops (the adds, the linear layers' backward) its own
    # way: close, not bitwise.
    torch.testing.assert_close(ours, eager, rtol=1e-3, atol=1e-5)
    ours.sum().backward()
    g_compiled = x.grad.clone()
    x.grad = None
    eager.sum().backward()
    torch.testing.assert_close(g_compiled, x.grad, rtol=1e-3, atol=1e-4)


def test_cross_entropy_compiles_fullgraph_with_its_fused_backward():
    """ft.cross_entropy under torch.compile(fullgraph=True): one graph, the loss and the fused
    backward (the op ferrocuda::cross_entropy_backward) as in eager mode."""
    torch.manual_seed(0)
    logits = torch.randn(64, 1000, device=DEV, dtype=torch.bfloat16)
    targets = torch.randint(0, 1000, (64,), device=DEV)
    targets[::9] = -100

    def loss_of(l):
        return ft.cross_entropy(l, targets)

    explanation = torch._dynamo.explain(loss_of)(logits.clone().requires_grad_(True))
    assert explanation.graph_break_count == 0, explanation.break_reasons
    compiled = torch.compile(loss_of, fullgraph=True)
    grads = []
    for f in (compiled, loss_of):
        leaf = logits.clone().requires_grad_(True)
        loss = f(leaf)
        loss.backward()
        grads.append((loss.detach(), leaf.grad))
    torch.testing.assert_close(grads[0][0], grads[1][0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grads[0][1], grads[1][1])


def test_a_captured_graph_replays_with_new_inputs():
    """Also the regression test of the first GPU run's failure: borrowing torch's stream read
    its flags (cuStreamGetFlags), which the driver refuses during a capture, invalidating it."""
    torch.manual_seed(0)
    block = Block().to(DEV).to(torch.bfloat16)
    static_x = torch.randn(2, 64, 256, device=DEV, dtype=torch.bfloat16)
    cos, sin = ft.rotary_tables(64, 64, device=DEV)
    positions = torch.arange(64, device=DEV).repeat(2, 1)
    targets = torch.randint(0, 256, (128,), device=DEV)

    @torch.no_grad()
    def step(x):
        y = block(x)
        r = ft.rotary(y.view(2, 64, 4, 64), positions, cos, sin)
        return y, r, ft.cross_entropy(y.view(128, 256), targets)

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up (loads the kernels, as torch's own docs ask)
        for _ in range(2):
            step(static_x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_out = step(static_x)
    for _ in range(3):
        new_x = torch.randn_like(static_x)
        static_x.copy_(new_x)
        g.replay()
        torch.cuda.synchronize()
        expected = step(new_x)
        # Eager bf16 attention may take the sm_90 kernels, which a capture does not (they
        # build tensor maps): the captured graph runs the tensor-core path, so compare within
        # bf16's tolerance.
        for what, got, want in zip(["block", "rotary", "cross_entropy"], static_out, expected):
            close(got, want, torch.bfloat16, what=what)


def test_a_captured_training_step_with_backward_and_adamw_replays():
    torch.manual_seed(0)
    w = torch.randn(512, device=DEV, requires_grad=True)
    m, v = torch.zeros(512, device=DEV), torch.zeros(512, device=DEV)
    static_x = torch.randn(32, 512, device=DEV)

    def step():
        loss = ft.layernorm(ft.rmsnorm(static_x, w), w, w).square().mean()
        loss.backward()
        ft.adamw_(w.data, w.grad, m, v, lr=1e-3, step=1)
        w.grad = None
        return loss

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(s)
    before = w.detach().clone()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_loss = step()
    torch.cuda.synchronize()
    assert torch.equal(w.detach(), before), "capturing must not run the step"
    g.replay()
    torch.cuda.synchronize()
    assert not torch.equal(w.detach(), before), "the replay ran the optimiser step"
    assert torch.isfinite(static_loss).item()


def test_a_captured_attention_backward_replays():
    """Regression (s10-torch): the tensor-core attention backward (bf16/f16, D 64 and 128)
    allocated its delta rows itself instead of using the scratch the op passes, so capturing a
    training step with attention was refused (AllocationInCapture)."""
    torch.manual_seed(0)
    shape = (2, 4, 128, 64)
    static = [torch.randn(shape, device=DEV, dtype=torch.bfloat16, requires_grad=True) for _ in range(3)]
    dout = torch.randn(shape, device=DEV, dtype=torch.bfloat16)

    def step():
        out = ft.attention(*static, causal=True)
        return torch.autograd.grad(out, static, dout)

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_grads = step()
    for _ in range(2):
        with torch.no_grad():
            for t in static:
                t.copy_(torch.randn_like(t))
        g.replay()
        torch.cuda.synchronize()
        expected = step()
        for what, got, want in zip(["dq", "dk", "dv"], static_grads, expected):
            close(got, want, torch.bfloat16, what=what)
