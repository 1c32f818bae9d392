"""Compares the gradients of one attention backward call of ours (written by
`bench_attention --check DIR`: bf16 [B, H, S, D], B 2, 8 query heads over 2 key/value heads,
S 1000, D 128, causal) and PyTorch's cuDNN backward (bf16, same inputs) with an f64 reference
(PyTorch's math backend in float64). Prints, per gradient, max |x - ref| / max |ref| and the
relative Frobenius error for both. A check beside the f64 tests, not a benchmark."""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

d = sys.argv[1]
B, H, HKV, S, D = 2, 8, 2, 1000, 128
G = H // HKV


def load(name, heads):
    raw = open(f"{d}/{name}.bin", "rb").read()
    return torch.frombuffer(bytearray(raw), dtype=torch.bfloat16).view(B, heads, S, D).cuda()


q, k, v, do = load("q", H), load("k", HKV), load("v", HKV), load("do", H)
ours = dict(dq=load("dq", H), dk=load("dk", HKV), dv=load("dv", HKV))


def grads(q, k, v, do, backend):
    q, k, v = (x.detach().clone().requires_grad_(True) for x in (q, k, v))
    with sdpa_kernel(backend):
        out = F.scaled_dot_product_attention(q, k.repeat_interleave(G, 1), v.repeat_interleave(G, 1), is_causal=True)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), do)
    return dict(dq=dq, dk=dk, dv=dv)


ref = grads(q.double(), k.double(), v.double(), do.double(), SDPBackend.MATH)
cudnn = grads(q, k, v, do, SDPBackend.CUDNN_ATTENTION)
print(f"attention backward check on {torch.cuda.get_device_name()}: B{B} H{H} HKV{HKV} S{S} D{D} causal, bf16 vs f64")
worst = 0.0
for name in ("dq", "dk", "dv"):
    r = ref[name]
    line = []
    for label, x in (("ours", ours[name]), ("cudnn", cudnn[name])):
        e = (x.double() - r)
        max_rel = (e.abs().max() / r.abs().max()).item()
        fro = (e.norm() / r.norm()).item()
        line.append(f"{label}: max {max_rel:.2e} frob {fro:.2e}")
        if label == "ours":
            worst = max(worst, fro)
    print(f"  {name}: " + " | ".join(line))
print("CHECK", "PASS" if worst < 2e-2 else "FAIL", f"(ours' worst relative Frobenius error {worst:.2e}, bound 2e-2)")
