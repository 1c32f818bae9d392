"""ferrocuda_torch's ops beside torch's own, on one GPU, in one process.

    python bench/bench_ops.py                   # everything
    python bench/bench_ops.py --quick           # fewer shapes
    python bench/bench_ops.py --attention-only  # attention beside SDPA: fwd, bwd, fwd+bwd

Each figure is the median over 5 timings of `iters` calls back to back between two CUDA
events (after warm-up), in microseconds per call; "ratio" is torch's time divided by ours
(above 1: ours is faster). Attention: ours (`ferrocuda_torch.attention`) beside
`F.scaled_dot_product_attention` (torch picks its backend: cuDNN or FlashAttention on
H100/H200): the forward, the backward alone (``torch.autograd.grad`` of one kept forward,
``retain_graph``) and forward+backward, in one run, each with its ratio; TFLOP/s counted as
4·B·H·S²·D forward (halved when causal) and 2.5x that for the backward. Row ops: beside torch eager (no torch.compile).
Every call goes through the torch.library dispatcher (custom-op overhead included), as a
user's would.
"""

import argparse
import statistics

import torch
import torch.nn.functional as F

import ferrocuda_torch as ft


def timed(f, iters, warmup=3):
    for _ in range(warmup):
        f()
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            f()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000 / iters)
    return statistics.median(times)


def row(name, ours, theirs, extra=""):
    print(f"{name:<58} ours {ours:10.1f} us   torch {theirs:10.1f} us   ratio {theirs / ours:6.2f}{extra}", flush=True)


def bench_attention(quick):
    print("\n## attention (bf16, [B, H, S, D]); ratio = torch time / ours")
    print("ours: ferrocuda_torch.attention (the library's attention: on sm_90 the wgmma forward and backward kernels for")
    print("bf16/f16 at D 64/128, the mma.sync backward inside a graph capture); torch: F.scaled_dot_product_attention")
    shapes = [(4, 16, 1024, 128), (1, 16, 4096, 128), (4, 16, 1024, 64)]
    if quick:
        shapes = shapes[:1]
    for b, h, s, d in shapes:
        for causal in (False, True):
            q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            flops = 4 * b * h * s * s * d / (2 if causal else 1)
            tag = f"B{b} H{h} S{s} D{d} {'causal' if causal else 'full'}"
            fwd_ours = timed(lambda: ft.attention(q, k, v, causal), 20)
            fwd_torch = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), 20)
            row(f"attention fwd {tag}", fwd_ours, fwd_torch, f"   TFLOP/s ours {flops / fwd_ours / 1e6:6.1f} torch {flops / fwd_torch / 1e6:6.1f}")
            qg, kg, vg = (t.clone().requires_grad_(True) for t in (q, k, v))
            dout = torch.randn_like(q)
            # The backward alone: one forward kept (retain_graph), its backward timed again and again.
            out_ours = ft.attention(qg, kg, vg, causal)
            out_torch = F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal)
            bwd_ours = timed(lambda: torch.autograd.grad(out_ours, (qg, kg, vg), dout, retain_graph=True), 10)
            bwd_torch = timed(lambda: torch.autograd.grad(out_torch, (qg, kg, vg), dout, retain_graph=True), 10)
            row(f"attention bwd {tag}", bwd_ours, bwd_torch, f"   TFLOP/s ours {2.5 * flops / bwd_ours / 1e6:6.1f} torch {2.5 * flops / bwd_torch / 1e6:6.1f}")
            del out_ours, out_torch

            def ours_fb():
                torch.autograd.grad(ft.attention(qg, kg, vg, causal), (qg, kg, vg), dout)

            def torch_fb():
                torch.autograd.grad(F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal), (qg, kg, vg), dout)

            fb_ours = timed(ours_fb, 10)
            fb_torch = timed(torch_fb, 10)
            row(f"attention fwd+bwd {tag}", fb_ours, fb_torch, f"   TFLOP/s ours {3.5 * flops / fb_ours / 1e6:6.1f} torch {3.5 * flops / fb_torch / 1e6:6.1f}")


def bench_rows(quick):
    print("\n## row ops vs torch eager (bf16 unless said); ratio = torch time / ours")
    dt = torch.bfloat16
    for rows, cols in [(16384, 4096)] + ([] if quick else [(16384, 768), (8, 4096)]):
        x = torch.randn(rows, cols, device="cuda", dtype=dt)
        w = torch.randn(cols, device="cuda", dtype=dt)
        b = torch.randn(cols, device="cuda", dtype=dt)
        tag = f"{rows}x{cols}"
        row(f"rmsnorm {tag}", timed(lambda: ft.rmsnorm(x, w), 50), timed(lambda: F.rms_norm(x, (cols,), w, 1e-6), 50))
        row(f"layernorm {tag}", timed(lambda: ft.layernorm(x, w, b), 50), timed(lambda: F.layer_norm(x, (cols,), w, b, 1e-5), 50))
        r = torch.randn_like(x)

        def torch_add_rmsnorm():
            total = x + r
            return F.rms_norm(total, (cols,), w, 1e-6), total

        row(f"add_rmsnorm {tag} (torch: add, then rms_norm)", timed(lambda: ft.add_rmsnorm(x, r, w), 50), timed(torch_add_rmsnorm, 50))
        row(f"softmax {tag}", timed(lambda: ft.softmax(x), 50), timed(lambda: torch.softmax(x, -1), 50))
        row(f"gelu(tanh) {tag}", timed(lambda: ft.gelu(x), 50), timed(lambda: F.gelu(x, approximate="tanh"), 50))
        row(
            f"silu_and_mul {tag} -> {cols // 2}",
            timed(lambda: ft.silu_and_mul(x), 50),
            timed(lambda: F.silu(x[:, : cols // 2]) * x[:, cols // 2 :], 50),
        )
        xg, wg = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
        dout = torch.randn_like(x)
        row(
            f"rmsnorm fwd+bwd {tag}",
            timed(lambda: ft.rmsnorm(xg, wg).backward(dout), 20),
            timed(lambda: F.rms_norm(xg, (cols,), wg, 1e-6).backward(dout), 20),
        )
    for n, vocab in [(8192, 50304)] + ([] if quick else [(1024, 50304)]):
        logits = torch.randn(n, vocab, device="cuda", dtype=dt)
        targets = torch.randint(0, vocab, (n,), device="cuda")
        row(
            f"cross_entropy fwd (losses and lse; the gradient in the backward) {n}x{vocab}",
            timed(lambda: ft.cross_entropy(logits, targets), 20),
            timed(lambda: F.cross_entropy(logits, targets), 20),
        )
        lg = logits.clone().requires_grad_(True)
        row(
            f"cross_entropy fwd+bwd {n}x{vocab}",
            timed(lambda: ft.cross_entropy(lg, targets).backward(), 10),
            timed(lambda: F.cross_entropy(lg, targets).backward(), 10),
        )
    b_, s_, h_, d_ = 8, 2048, 32, 128
    x = torch.randn(b_, s_, h_, d_, device="cuda", dtype=dt)
    positions = torch.arange(s_, device="cuda").repeat(b_, 1)
    cos, sin = ft.rotary_tables(s_, d_, device="cuda")
    c, s = cos[positions].unsqueeze(-2).to(dt), sin[positions].unsqueeze(-2).to(dt)

    def torch_rotary():
        x1, x2 = x[..., : d_ // 2], x[..., d_ // 2 :]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)

    row(f"rotary [{b_},{s_},{h_},{d_}] (torch: rotate-half in eager ops)", timed(lambda: ft.rotary(x, positions, cos, sin), 50), timed(torch_rotary, 50))
    n = 64 * 1024 * 1024
    p = torch.randn(n, device="cuda", dtype=torch.float32)
    g = torch.randn(n, device="cuda", dtype=torch.float32)
    m, v = torch.zeros(n, device="cuda"), torch.zeros(n, device="cuda")
    param = torch.nn.Parameter(p.clone())
    param.grad = g.clone()
    opt = torch.optim.AdamW([param], lr=1e-3, fused=True)
    opt.step()
    row(
        "adamw f32 64M params (torch: AdamW fused=True)",
        timed(lambda: ft.adamw_(p, g, m, v, lr=1e-3, step=1), 20),
        timed(opt.step, 20),
    )
    bench_per_call()


def bench_per_call():
    """A call whose GPU work is negligible: the host side sets the pace (dispatcher, checks,
    allocations, borrow checks, launch)."""
    dt = torch.bfloat16
    tiny = torch.randn(8, 64, device="cuda", dtype=dt)
    tw = torch.randn(64, device="cuda", dtype=dt)
    row("rmsnorm 8x64 (per-call overhead: dispatcher + launch)", timed(lambda: ft.rmsnorm(tiny, tw), 200), timed(lambda: F.rms_norm(tiny, (64,), tw, 1e-6), 200))
    op = torch.ops.ferrocuda.rmsnorm.default
    row("rmsnorm 8x64 via torch.ops (its autograd kernel too)", timed(lambda: op(tiny, tw, 1e-6), 200), timed(lambda: F.rms_norm(tiny, (64,), tw, 1e-6), 200))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--attention-only", action="store_true", help="the attention rows and the per-call rows alone (about 30 s)")
    args = parser.parse_args()
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    bench_attention(args.quick)
    if args.attention_only:
        print("\n## per-call overhead (bf16); ratio = torch time / ours")
        bench_per_call()
    else:
        bench_rows(args.quick)


if __name__ == "__main__":
    main()
