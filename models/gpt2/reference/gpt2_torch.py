#!/usr/bin/env python3
"""GPT-2 in plain PyTorch: the reference the Rust trainer (models/gpt2) is checked against.

Reads the same llm.c model file (version 1: f32, 3: bf16) and token shard as `gpt2`, takes
the same batches (rank 0 of 1: windows of B*T+1 tokens, advancing B*T), and runs the same
training step: tied classifier over the real vocabulary (the padded rows of the token table
never count), tanh GELU, LayerNorm eps 1e-5, causal attention, mean cross-entropy, global
gradient-norm clipping, AdamW (weight decay on matrices and embeddings only), constant
learning rate. Prints `step N loss X` for each step (the loss before that step's update).

Precision (`--dtype`): `f32` (TF32 off: the tight comparison); `bf16`, ours's scheme written
out with explicit casts: f32 master weights and gradients, AdamW in f32, every parameter read
as its bf16 rounding, every activation stored in bf16 where `gpt2 --dtype bf16` stores it (the
embeddings' sum, the residual stream, the norms' outputs, every GEMM's output with its bias
added before the one rounding, the attention output, GELU's output, the logits), the
arithmetic inside each operation in f32 (norm statistics, GEMM accumulation, softmax,
cross-entropy); `autocast`, `torch.autocast(bfloat16)` over the f32 model (GEMM outputs bf16
but the residual stream, the norms and the softmax in f32: a different scheme, llm.c's and
ours round more often). `--attention math` (f32 scores and softmax) or `sdpa`
(`scaled_dot_product_attention`, flash on bf16). `--trace` adds a line per step: the three
largest per-token losses and the largest magnitudes of the residual stream, attention output
and MLP activation per layer (`gpt2` prints the same line with GPT2_TRACE=1).

    python3 gpt2_torch.py --checkpoint model.bin --data shard.bin --batch 4 --seq 256 --steps 20
    python3 gpt2_torch.py --bench --batch 64 --seq 1024 --steps 30 [--compile]

`--bench`: random init, synthetic tokens, bf16 autocast, SDPA (flash) attention, fused AdamW;
prints the mean ms/step and tokens/s of steps 11-30 (the issue's method).
"""
import argparse
import math
import time

import numpy as np
import torch
import torch.nn.functional as F

MODEL_MAGIC = 20240326
SHARD_MAGIC = 20240520


def read_model(path):
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(1024), dtype="<i4")
        assert header[0] == MODEL_MAGIC, f"{path}: not an llm.c model file"
        version = int(header[1])
        cfg = dict(max_seq=int(header[2]), vocab=int(header[3]), layers=int(header[4]), heads=int(header[5]), channels=int(header[6]), padded_vocab=int(header[7]))
        if version == 1:
            flat = np.frombuffer(f.read(), dtype="<f4").astype(np.float32)
        elif version == 3:
            raw = np.frombuffer(f.read(), dtype="<u2").astype(np.uint32) << 16
            flat = raw.view(np.float32)
        else:
            raise SystemExit(f"{path}: model version {version} unsupported")
    return cfg, torch.from_numpy(flat.copy())


def read_shard(path):
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(1024), dtype="<i4")
        assert header[0] == SHARD_MAGIC and header[1] == 1, f"{path}: not a token shard"
        return np.frombuffer(f.read(), dtype="<u2")[: int(header[2])].astype(np.int64)


def shapes(cfg):
    """llm.c's parameter order and shapes."""
    c, l, vp, t = cfg["channels"], cfg["layers"], cfg["padded_vocab"], cfg["max_seq"]
    return [
        ("wte", (vp, c)), ("wpe", (t, c)), ("ln1w", (l, c)), ("ln1b", (l, c)),
        ("qkvw", (l, 3 * c, c)), ("qkvb", (l, 3 * c)), ("attprojw", (l, c, c)), ("attprojb", (l, c)),
        ("ln2w", (l, c)), ("ln2b", (l, c)), ("fcw", (l, 4 * c, c)), ("fcb", (l, 4 * c)),
        ("fcprojw", (l, c, 4 * c)), ("fcprojb", (l, c)), ("lnfw", (c,)), ("lnfb", (c,)),
    ]


DECAY = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"}


class GPT2(torch.nn.Module):
    def __init__(self, cfg, flat=None):
        super().__init__()
        self.cfg = cfg
        offset = 0
        for name, shape in shapes(cfg):
            n = math.prod(shape)
            value = flat[offset: offset + n].view(shape).clone() if flat is not None else self._init(name, shape)
            self.register_parameter(name, torch.nn.Parameter(value))
            offset += n

    def _init(self, name, shape):
        cfg = self.cfg
        if name in ("ln1w", "ln2w", "lnfw"):
            return torch.ones(shape)
        if name in ("wte", "wpe", "qkvw", "fcw"):
            w = torch.randn(shape) * 0.02
            if name == "wte":
                w[cfg["vocab"]:] = 0
            return w
        if name in ("attprojw", "fcprojw"):
            return torch.randn(shape) * 0.02 / math.sqrt(2 * cfg["layers"])
        return torch.zeros(shape)

    def forward(self, idx, targets, flash=False, bf16=False, trace=None):
        """The mean loss. `bf16`: ours's bf16 scheme (see `--dtype bf16` in the module doc):
        every parameter read as its bf16 rounding, every activation stored in bf16 where ours
        stores it, arithmetic inside an operation in f32. `trace`: a list that gets one
        `(name, value)` per statistic of `trace_line`."""
        cfg = self.cfg
        b, t = idx.shape
        c, h = cfg["channels"], cfg["heads"]
        act = torch.bfloat16 if bf16 else None
        p = {n: (w.to(act) if bf16 else w) for n, w in self.named_parameters()}

        def store(z):
            return z.to(act) if bf16 else z

        def maxabs(z):
            return z.detach().float().abs().max().item()

        x = store(p["wte"][idx].float() + p["wpe"][:t].float())
        for l in range(cfg["layers"]):
            if trace is not None:
                trace.append((f"res{l}", maxabs(x)))
            y = F.layer_norm(x, (c,), p["ln1w"][l], p["ln1b"][l], 1e-5)
            qkv = F.linear(y, p["qkvw"][l], p["qkvb"][l])
            q, k, v = qkv.split(c, dim=-1)
            q, k, v = (z.view(b, t, h, c // h).transpose(1, 2) for z in (q, k, v))
            if flash:
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                # f32 scores and softmax (from bf16 q, k, v under --dtype bf16), the output stored.
                q, k, v = q.float(), k.float(), v.float()
                s = (q @ k.transpose(-2, -1)) / math.sqrt(c // h)
                mask = torch.ones(t, t, dtype=torch.bool, device=idx.device).tril()
                a = store(s.masked_fill(~mask, float("-inf")).softmax(-1) @ v)
            a = a.transpose(1, 2).reshape(b, t, c)
            if trace is not None:
                trace.append((f"att{l}", maxabs(a)))
            x = store(x + F.linear(a, p["attprojw"][l], p["attprojb"][l]))
            y = F.layer_norm(x, (c,), p["ln2w"][l], p["ln2b"][l], 1e-5)
            y = F.gelu(F.linear(y, p["fcw"][l], p["fcb"][l]), approximate="tanh")
            if trace is not None:
                trace.append((f"mlp{l}", maxabs(y)))
            x = store(x + F.linear(y, p["fcprojw"][l], p["fcprojb"][l]))
        if trace is not None:
            trace.append(("resf", maxabs(x)))
        x = F.layer_norm(x, (c,), p["lnfw"], p["lnfb"], 1e-5)
        # The classifier over the padded table (an aligned GEMM), the padded columns masked
        # to -inf so they never count: the loss and gradients of the unpadded model.
        logits = F.linear(x, p["wte"]).float()
        pad = torch.arange(cfg["padded_vocab"], device=idx.device) >= cfg["vocab"]
        if trace is not None:
            trace.append(("logits", maxabs(logits[..., : cfg["vocab"]])))
        logits = logits.masked_fill(pad, float("-inf"))
        losses = F.cross_entropy(logits.view(-1, cfg["padded_vocab"]), targets.view(-1), reduction="none")
        if trace is not None:
            trace.append(("losses", losses.detach().cpu()))
        return losses.mean()


def trace_line(step, trace, targets):
    """`trace N name value ...` and the three largest per-token losses `row:target:loss` (the
    same line `gpt2` prints with GPT2_TRACE=1)."""
    values = dict(trace)
    losses = values.pop("losses")
    top = torch.topk(losses, 3)
    flat = targets.reshape(-1).cpu()
    worst = " ".join(f"{int(i)}:{int(flat[i])}:{float(v):.3f}" for v, i in zip(top.values, top.indices))
    stats = " ".join(f"{name} {value:.4g}" for name, value in values.items())
    return f"trace {step} top {worst} | {stats}"


def optimizer(model, args, fused=False):
    decay = [p for n, p in model.named_parameters() if n in DECAY]
    other = [p for n, p in model.named_parameters() if n not in DECAY]
    groups = [{"params": decay, "weight_decay": args.weight_decay}, {"params": other, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=fused)


def batches(tokens, b, t):
    n = b * t
    pos = 0
    while True:
        if pos + n + 1 > len(tokens):
            pos = 0
        w = torch.from_numpy(tokens[pos: pos + n + 1])
        pos += n
        yield w[:-1].view(b, t), w[1:].view(b, t)


def train(args):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    # bf16 GEMMs accumulate in f32 and round once, as ours do (no reduced-precision reductions).
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    cfg, flat = read_model(args.checkpoint)
    model = GPT2(cfg, flat).to(args.device)
    opt = optimizer(model, args)
    data = batches(read_shard(args.data), args.batch, args.seq)
    flash = args.attention == "sdpa"
    perturb = torch.Generator(device=args.device).manual_seed(args.perturb) if args.perturb else None
    for step in range(1, args.steps + 1):
        x, y = next(data)
        x, y = x.to(args.device), y.to(args.device)
        trace = [] if args.trace else None
        if args.dtype == "autocast":
            with torch.autocast(torch.device(args.device).type, dtype=torch.bfloat16):
                loss = model(x, y, flash=flash, trace=trace)
        else:
            loss = model(x, y, flash=flash, bf16=args.dtype == "bf16", trace=trace)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if perturb is not None:
            # One f32 rounding's worth of noise per gradient element: what a different order of
            # f32 sums (atomics, another reduction tree) changes. Run-to-run spread of a
            # nondeterministic implementation, made reproducible by the seed.
            with torch.no_grad():
                for p in model.parameters():
                    noise = torch.rand(p.grad.shape, generator=perturb, device=p.grad.device)
                    p.grad.mul_(1 + (noise * 2 - 1) * 2.0**-24)
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        print(f"step {step} loss {loss.item():.6f}", flush=True)
        if trace is not None:
            print(trace_line(step, trace, y), flush=True)


def bench(args):
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    cfg = dict(max_seq=1024, vocab=50257, layers=12, heads=12, channels=768, padded_vocab=50304)
    torch.manual_seed(1337)
    model = GPT2(cfg).cuda()
    opt = optimizer(model, args, fused=True)
    step_fn = model
    if args.compile:
        step_fn = torch.compile(model)
    rng = np.random.default_rng(1)
    tokens = rng.integers(0, cfg["vocab"], size=args.batch * args.seq * 8 + 1)
    data = batches(tokens, args.batch, args.seq)
    times = []
    for step in range(1, args.steps + 1):
        x, y = next(data)
        x, y = x.cuda(), y.cuda()
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_fn(x, y, flash=True)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        value = loss.item()
        torch.cuda.synchronize()
        ms = (time.perf_counter() - start) * 1e3
        times.append(ms)
        print(f"step {step} loss {value:.6f} {ms:.2f} ms", flush=True)
    window = times[10:30] if len(times) >= 30 else times[1:]
    mean = sum(window) / len(window)
    kind = "torch.compile" if args.compile else "eager"
    print(f"summary: PyTorch {torch.__version__} {kind} bf16 autocast | B {args.batch} T {args.seq} | mean {mean:.2f} ms/step (steps 11-30) | {args.batch * args.seq / (mean / 1e3):.0f} tok/s | {torch.cuda.get_device_name()}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--checkpoint")
    p.add_argument("--data")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--dtype", default="f32", choices=["f32", "bf16", "autocast"])
    p.add_argument("--attention", default="math", choices=["math", "sdpa"])
    p.add_argument("--trace", action="store_true")
    p.add_argument("--perturb", type=int, default=0, help="seed of a one-rounding relative noise on every gradient (0: none)")
    p.add_argument("--device", default="cuda", help="cuda (default) or cpu (a check of the script on a tiny model)")
    p.add_argument("--bench", action="store_true")
    p.add_argument("--compile", action="store_true")
    args = p.parse_args()
    if args.bench:
        bench(args)
    else:
        train(args)


if __name__ == "__main__":
    main()
