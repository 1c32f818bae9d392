"""PyTorch eager on the ops of kernels/examples/bench_rows.rs (bf16 unless said), timed the same
way: 3 warm-up calls, then 7 rounds of 20 back-to-back calls between CUDA events, the median
round per call in µs. Prints `torch<TAB>op<TAB>shape<TAB>µs` lines that
scripts/gpu-run/rows_table.py joins with bench_rows's. A benchmark, not a test."""
import torch
import torch.nn.functional as F

dev, bf = "cuda", torch.bfloat16


def time(op, shape, f, note=""):
    for _ in range(3):
        f()
    rounds = []
    for _ in range(7):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(20):
            f()
        end.record()
        end.synchronize()
        rounds.append(start.elapsed_time(end) * 1e3 / 20)
    print(f"torch\t{op}\t{shape}\t{sorted(rounds)[3]:.2f}\t{note}")


torch.manual_seed(0)
print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
for cols in (768, 2048, 4096, 8192):
    x = torch.randn(8192, cols, device=dev, dtype=bf)
    w = torch.randn(cols, device=dev, dtype=bf)
    time("rmsnorm", f"8192x{cols}", lambda: F.rms_norm(x, (cols,), w, 1e-6))
rows, cols = 8192, 4096
x = torch.randn(rows, cols, device=dev, dtype=bf)
res = torch.randn(rows, cols, device=dev, dtype=bf)
w = torch.randn(cols, device=dev, dtype=bf)
b = torch.randn(cols, device=dev, dtype=bf)
big = f"{rows}x{cols}"
time("add_rmsnorm", big, lambda: F.rms_norm(x + res, (cols,), w, 1e-6))
time("layernorm", big, lambda: F.layer_norm(x, (cols,), w, b, 1e-5))
xg, wg, bg = x.clone().requires_grad_(True), w.clone().requires_grad_(True), b.clone().requires_grad_(True)
yl = F.layer_norm(xg, (cols,), wg, bg, 1e-5)
time("layernorm_backward", big, lambda: torch.autograd.grad(yl, (xg, wg, bg), res, retain_graph=True))
wr = w.clone().requires_grad_(True)
yr = F.rms_norm(xg, (cols,), wr, 1e-6)
time("rmsnorm_backward", big, lambda: torch.autograd.grad(yr, (xg, wr), res, retain_graph=True))
time("softmax", big, lambda: torch.softmax(x, -1))
logits = torch.randn(4096, 50304, device=dev, dtype=bf, requires_grad=True)
targets = torch.randint(0, 50304, (4096,), device=dev)


def ce_bf16():
    return torch.autograd.grad(F.cross_entropy(logits, targets), logits)


def ce_f32():
    return torch.autograd.grad(F.cross_entropy(logits.float(), targets), logits)


# Both forms; the table takes the faster (the bf16 one: no f32 copy of the logits).
time("cross_entropy fwd+bwd", "4096x50304", ce_bf16, "F.cross_entropy on bf16 logits + autograd")
time("cross_entropy fwd+bwd (f32 logits)", "4096x50304", ce_f32, "logits.float() first (kernels/bench/torch_eager.py's form)")
time("cross_entropy fwd", "4096x50304", lambda: F.cross_entropy(logits, targets), "F.cross_entropy on bf16 logits, forward only")
loss = F.cross_entropy(logits, targets)
time("cross_entropy bwd", "4096x50304", lambda: torch.autograd.grad(loss, logits, retain_graph=True), "autograd of F.cross_entropy alone")
time("gelu", big, lambda: F.gelu(x, approximate="tanh"))
xg2 = x.clone().requires_grad_(True)
yg = F.gelu(xg2, approximate="tanh")
time("gelu_backward", big, lambda: torch.autograd.grad(yg, xg2, res, retain_graph=True))
time("silu_and_mul", "8192x(2x2048)", lambda: F.silu(x[:, :2048]) * x[:, 2048:])
xs = x.clone().requires_grad_(True)
ys = F.silu(xs[:, :2048]) * xs[:, 2048:]
ds = res[:, :2048].contiguous()
time("silu_and_mul_backward", "8192x(2x2048)", lambda: torch.autograd.grad(ys, xs, ds, retain_graph=True))
q = x.view(8192, 32, 128)
cos = torch.randn(8192, 1, 64, device=dev, dtype=bf)
sin = torch.randn(8192, 1, 64, device=dev, dtype=bf)


def rope():
    x1, x2 = q[..., :64], q[..., 64:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


time("rotary_embedding", "8192x32x128", rope, "rotate-half in eager ops")
p = 64 << 20
params = [torch.zeros(p, device=dev, requires_grad=True)]
params[0].grad = torch.zeros(p, device=dev)
opt = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
time("adamw f32", "64M params", opt.step, "fused AdamW")
g = torch.zeros(p, device=dev)
time("sum_of_squares f32", "64M", lambda: torch.linalg.vector_norm(g), "vector_norm")
