"""PyTorch eager on the shapes of kernels/examples/bench_kernels.rs (bf16 unless said), timed
the same way: 3 warm-up calls, then the mean of 20 back-to-back calls between CUDA events.
A benchmark, not a test. BENCH_ROWS_ONLY=1 stops before attention."""
import os
import sys

import torch
import torch.nn.functional as F

dev = "cuda"
bf = torch.bfloat16


def time(name, nbytes, flops, f):
    for _ in range(3):
        f()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(20):
        f()
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end) / 20
    print(f"{name:<44} {ms:>9.4f} ms  {nbytes / (ms * 1e-3) / 1e9:>8.1f} GB/s  {flops / (ms * 1e-3) / 1e12:>7.2f} TFLOP/s")


torch.manual_seed(0)
rows, cols = 8192, 4096
n = rows * cols
x = torch.randn(rows, cols, device=dev, dtype=bf)
res = torch.randn(rows, cols, device=dev, dtype=bf)
w = torch.randn(cols, device=dev, dtype=bf)
b = torch.randn(cols, device=dev, dtype=bf)
print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
time("rmsnorm 8192x4096", 4 * n, 0, lambda: F.rms_norm(x, (cols,), w, 1e-6))
time("add_rmsnorm 8192x4096", 8 * n, 0, lambda: F.rms_norm(x + res, (cols,), w, 1e-6))
time("layernorm 8192x4096", 4 * n, 0, lambda: F.layer_norm(x, (cols,), w, b, 1e-5))
xg = x.clone().requires_grad_(True)
wg = w.clone().requires_grad_(True)
bg = b.clone().requires_grad_(True)
yl = F.layer_norm(xg, (cols,), wg, bg, 1e-5)
time("layernorm_backward 8192x4096 (dx,dw,db)", 6 * n, 0,
     lambda: torch.autograd.grad(yl, (xg, wg, bg), res, retain_graph=True))
wr = w.clone().requires_grad_(True)
yr = F.rms_norm(xg, (cols,), wr, 1e-6)
time("rmsnorm_backward 8192x4096 (dx,dw)", 6 * n, 0,
     lambda: torch.autograd.grad(yr, (xg, wr), res, retain_graph=True))
time("softmax 8192x4096", 4 * n, 0, lambda: torch.softmax(x, -1))
time("gelu 8192x4096", 4 * n, 0, lambda: F.gelu(x, approximate="tanh"))
xg2 = x.clone().requires_grad_(True)
yg = F.gelu(xg2, approximate="tanh")
time("gelu_backward 8192x4096", 6 * n, 0, lambda: torch.autograd.grad(yg, xg2, res, retain_graph=True))
time("silu_and_mul 8192x(2x2048)", 3 * n, 0, lambda: F.silu(x[:, :2048]) * x[:, 2048:])
xs = x.clone().requires_grad_(True)
ys = F.silu(xs[:, :2048]) * xs[:, 2048:]
ds = res[:, :2048].contiguous()
time("silu_and_mul_backward 8192x(2x2048)", 5 * n, 0, lambda: torch.autograd.grad(ys, xs, ds, retain_graph=True))
q = x.view(8192, 32, 128)
cos = torch.randn(8192, 1, 64, device=dev, dtype=bf)
sin = torch.randn(8192, 1, 64, device=dev, dtype=bf)


def rope():
    x1, x2 = q[..., :64], q[..., 64:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


time("rotary_embedding 8192x32x128", 4 * n, 0, rope)
logits = torch.randn(4096, 50304, device=dev, dtype=bf, requires_grad=True)
targets = torch.randint(0, 50304, (4096,), device=dev)


def ce():
    loss = F.cross_entropy(logits.float(), targets)
    return torch.autograd.grad(loss, logits)


time("cross_entropy fwd+bwd 4096x50304", 4 * 4096 * 50304, 0, ce)
p = 64 << 20
for fused in (False, True):
    params = [torch.zeros(p, device=dev, requires_grad=True)]
    params[0].grad = torch.zeros(p, device=dev)
    opt = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1, fused=fused, foreach=not fused)
    time(f"adamw f32 64M params ({'fused' if fused else 'foreach'})", 28 * p, 0, opt.step)
g = torch.zeros(p, device=dev)
time("sum_of_squares f32 64M", 4 * p, 0, lambda: torch.linalg.vector_norm(g))
if os.environ.get("BENCH_ROWS_ONLY"):  # as bench_kernels: stop before attention
    sys.exit(0)
for s, causal in ((1024, False), (1024, True), (4096, False), (4096, True)):
    qa = torch.randn(4, 16, s, 128, device=dev, dtype=bf, requires_grad=True)
    ka = torch.randn(4, 16, s, 128, device=dev, dtype=bf, requires_grad=True)
    va = torch.randn(4, 16, s, 128, device=dev, dtype=bf, requires_grad=True)
    flops = 4 * 64 * s * s * 128 * (0.5 if causal else 1.0)
    for backend in (torch.nn.attention.SDPBackend.CUDNN_ATTENTION, torch.nn.attention.SDPBackend.FLASH_ATTENTION):
        with torch.nn.attention.sdpa_kernel(backend):
            name = "cudnn" if backend == torch.nn.attention.SDPBackend.CUDNN_ATTENTION else "fa2"
            time(f"attention fwd B4 H16 S{s} D128 causal={causal} {name}", 0, flops,
                 lambda: F.scaled_dot_product_attention(qa, ka, va, is_causal=causal))
            if s == 1024:
                o = F.scaled_dot_product_attention(qa, ka, va, is_causal=causal)
                time(f"attention bwd B4 H16 S{s} D128 causal={causal} {name}", 0, 2.5 * flops,
                     lambda: torch.autograd.grad(o, (qa, ka, va), o, retain_graph=True))
