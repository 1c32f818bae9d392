"""Session 14's final forward table for the code as committed, from the two H200 runs
(run1-h200: every schedule of the run-1 kernels; run2-h200: every schedule of the run-2
kernels, the run-1 binary beside it up to S 2k, S 16k, D 256, the backward). The committed
kernels are run 1's (SASS identical up to commuted FADD operands) except the persistent
ping-pong ones, which are run 2's (the split softmax reductions; SASS identical). Each row
takes the pick's figure from a run that ran that exact kernel, with that run's cuDNN and FA2:
the one-tile kernels from run 2's run-1 binary (S <= 2k) or run 1 (4k-8k); the persistent
ping-pong ones from run 2; S 16k from run 2 (where the pick is a one-tile kernel, run 2 ran
its split-softmax form, marked *). Backward: run 2 (its code is main's). Usage: python3
compose.py (from this folder); prints Markdown."""
import json

def load(path):
    return [json.loads(l) for l in open(path)]

def schedules(r):
    out = {r["fwd_path"]: r["fwd_tflops"]}
    if "fwd_twin_path" in r:
        out[r["fwd_twin_path"]] = r["fwd_twin_tflops"]
    for k, v in r.get("fwd_all", {}).items():
        out[k] = v[1]
    return out

key = lambda r: (r["head_dim"], r["seq"], r["causal"])
r1 = {key(r): r for r in load("run1-h200/ours.jsonl")}
r2 = {key(r): r for r in load("run2-h200/ours.jsonl")}
b2 = {key(r): r for r in load("run2-h200/base.jsonl")}
sd1 = {(r["impl"],) + key(r): r for r in load("run1-h200/sdpa.jsonl")}
sd2 = {(r["impl"],) + key(r): r for r in load("run2-h200/sdpa.jsonl")}

def pick(d, s, causal):
    # kernels/src/hopper.rs, hopper_kernel (session 14)
    if d == 64 and not causal:
        return "attention_d64_persistent" if s <= 1024 else "attention_d64"
    if d == 64:
        return "attention_d64_causal_pingpong_persistent" if s <= 2048 else "attention_d64_causal_pingpong"
    if not causal:
        if s <= 768:
            return "attention_d128_pingpong_persistent"
        return "attention_d128_pingpong_s3" if 2048 <= s <= 4096 else "attention_d128_pingpong"
    if s <= 2048:
        return "attention_d128_causal_pingpong_persistent"
    return "attention_d128_causal_pingpong_s3" if s <= 4096 else "attention_d128_causal_pingpong"

print("| D | S | causal | fwd ours | cuDNN | FA2 | ours/cuDNN | ours/FA2 | kernel (run) | bwd ours | cuDNN | FA2 | ours/cuDNN | ours/FA2 |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for d in (128, 64, 256):
    for causal in (False, True):
        for s in (512, 1024, 2048, 4096, 8192, 16384):
            k = (d, s, causal)
            if d == 256:
                cu, fa = sd2.get(("cudnn",) + k), sd2.get(("fa2",) + k)
                if not cu:
                    continue
                o = r2.get(k)
                fwd = f"{o['fwd_tflops']:.1f} (portable)" if o else "-"
                ratio = f"{o['fwd_tflops'] / cu['fwd_tflops']:.3f}" if o else "-"
                print(f"| {d} | {s} | {'yes' if causal else 'no'} | {fwd} | {cu['fwd_tflops']:.0f} | {fa['fwd_tflops']:.0f} | {ratio} | | | - | {cu['bwd_tflops']:.0f} | {fa['bwd_tflops']:.0f} | | |")
                continue
            name = pick(d, s, causal)
            persistent_pp = "persistent" in name and "pingpong" in name
            mark = ""
            if persistent_pp or s == 16384:
                src, run, sd = r2, "2", sd2
                mark = "*" if (s == 16384 and not persistent_pp) else ""
            elif s <= 2048:
                src, run, sd = b2, "2, run-1 binary", sd2
            else:
                src, run, sd = r1, "1", sd1
            tf = schedules(src[k])[name]
            cu, fa = sd[("cudnn",) + k], sd[("fa2",) + k]
            bo, bcu, bfa = r2[k]["bwd_tflops"], sd2[("cudnn",) + k]["bwd_tflops"], sd2[("fa2",) + k]["bwd_tflops"]
            print(f"| {d} | {s} | {'yes' if causal else 'no'} | {tf:.0f}{mark} | {cu['fwd_tflops']:.0f} | {fa['fwd_tflops']:.0f} | **{tf / cu['fwd_tflops']:.3f}** | {tf / fa['fwd_tflops']:.2f} | `{name.replace('attention_', '')}` ({run}) | {bo:.0f} | {bcu:.0f} | {bfa:.0f} | {bo / bcu:.3f} | {bo / bfa:.2f} |")
