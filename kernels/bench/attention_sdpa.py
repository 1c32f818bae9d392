"""PyTorch's scaled_dot_product_attention (cuDNN and FlashAttention-2 backends) on the shapes of
kernels/examples/bench_attention.rs, timed the same way (2 warm-up calls, then the mean of up to
20 back-to-back calls between CUDA events, fewer for calls over 15 ms, at least 3; with
BENCH_REPEAT=n the median of n such means). Forward, and
forward + backward (torch.autograd.grad of the output with a random dO); backward = (fwd + bwd) -
fwd. FLOPs as in the Rust benchmark. Writes JSON lines to the file named by argv[1].
A benchmark, not a test."""
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def time(f):
    for _ in range(2):
        f()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    f()
    end.record()
    end.synchronize()
    once = start.elapsed_time(end)
    iters = max(3, min(20, int(300.0 / max(once, 1e-3))))
    means = []
    for _ in range(REPEAT):
        start.record()
        for _ in range(iters):
            f()
        end.record()
        end.synchronize()
        means.append(start.elapsed_time(end) / iters)
    means.sort()
    if REPEAT > 1:
        print(f"  spread of {REPEAT} means (ms): {means[0]:.4f} .. {means[-1]:.4f}", file=sys.stderr)
    return means[REPEAT // 2]


# BENCH_REPEAT=n: the median of n timings; BENCH_MIN_S=n / BENCH_MAX_S=n: skip shorter / longer
# sequences
REPEAT = max(1, int(os.environ.get("BENCH_REPEAT", "1")))
MIN_S = int(os.environ.get("BENCH_MIN_S", "0"))
# (S 16k only when BENCH_MAX_S asks for it, as in the Rust benchmark; BENCH_D256=1 adds head dim 256.)
MAX_S = int(os.environ.get("BENCH_MAX_S", "8192"))
D256 = os.environ.get("BENCH_D256", "0") == "1"
# BENCH_D=64: that head dimension only; BENCH_FWD_ONLY=1: the forward only (bwd NaN), as the
# Rust benchmark's knobs of the same names.
ONLY_D = int(os.environ.get("BENCH_D", "0"))
FWD_ONLY = os.environ.get("BENCH_FWD_ONLY", "0") == "1"
# BENCH_TOKENS=n: B·S = n (at least one sequence) instead of 16k, as the Rust benchmark's knob.
TOKENS = int(os.environ.get("BENCH_TOKENS", "16384"))


out = open(sys.argv[1], "w") if len(sys.argv) > 1 else None
print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()} on {torch.cuda.get_device_name()}")
print(f"{'sdpa (bf16, [B,H,S,D])':<34} {'backend':>8} {'fwd ms':>9} {'bwd ms':>9} {'fwd TF/s':>9} {'bwd TF/s':>9}")
torch.manual_seed(0)
for d in (128, 64) + ((256,) if D256 else ()):
    for s in (512, 1024, 2048, 4096, 8192, 16384):
        for causal in (False, True):
            if s < MIN_S or s > MAX_S or (ONLY_D and d != ONLY_D):
                continue
            b, h = max(1, TOKENS // s), 2048 // d
            q, k, v, do = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
            q.requires_grad_(True)
            k.requires_grad_(True)
            v.requires_grad_(True)
            flops = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
            for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("fa2", SDPBackend.FLASH_ATTENTION)):
                with sdpa_kernel(backend):
                    fwd = time(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
                    both = float("nan") if FWD_ONLY else time(lambda: torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=causal), (q, k, v), do))
                bwd = both - fwd
                row = dict(impl=name, head_dim=d, seq=s, batch=b, heads=h, causal=causal, fwd_ms=fwd, bwd_ms=bwd,
                           fwd_tflops=flops / (fwd * 1e-3) / 1e12, bwd_tflops=2.5 * flops / (bwd * 1e-3) / 1e12)
                label = f"D{d} S{s} B{b} H{h}" + (" causal" if causal else "")
                print(f"{label:<34} {name:>8} {fwd:>9.3f} {bwd:>9.3f} {row['fwd_tflops']:>9.1f} {row['bwd_tflops']:>9.1f}")
                if out:
                    out.write(json.dumps(row) + "\n")
            del q, k, v, do
