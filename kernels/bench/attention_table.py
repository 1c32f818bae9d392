"""Joins the JSON lines of bench_attention (ours) and attention_sdpa.py (cuDNN, FA2) into one
JSON file and a Markdown table: TFLOP/s forward and backward, ours / cuDNN, ours / FA2.
Usage: attention_table.py ours.jsonl sdpa.jsonl out.json out.md [gpu name]"""
import json
import sys

rows = [json.loads(line) for path in sys.argv[1:3] for line in open(path) if line.strip()]
by = {(r["impl"], r["head_dim"], r["seq"], r["causal"]): r for r in rows}
keys = sorted({(r["head_dim"], r["seq"], r["causal"]) for r in rows}, key=lambda k: (-k[0], k[2], k[1]))
table, joined = [], []
gpu = sys.argv[5] if len(sys.argv) > 5 else "GPU"
table.append(f"Attention, bf16 `[B, H, S, D]`, B·S = 16k, H·D = 2048, TFLOP/s on one {gpu} (backward FLOPs = 2.5 x forward; "
             "SDPA backward = (fwd+bwd) - fwd)\n")
table.append("| D | S | causal | fwd ours | fwd cuDNN | fwd FA2 | ours/cuDNN | bwd ours | bwd cuDNN | bwd FA2 | ours/cuDNN | ours/FA2 |")
table.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
for d, s, c in keys:
    o, cu, fa = (by.get((i, d, s, c)) for i in ("ours", "cudnn", "fa2"))
    if not o:
        continue
    get = lambda r, f: r[f] if r else float("nan")
    ratio = lambda a, b: a / b if b and b == b else float("nan")
    line = dict(head_dim=d, seq=s, causal=c,
                fwd=dict(ours=o["fwd_tflops"], cudnn=get(cu, "fwd_tflops"), fa2=get(fa, "fwd_tflops")),
                bwd=dict(ours=o["bwd_tflops"], cudnn=get(cu, "bwd_tflops"), fa2=get(fa, "bwd_tflops")))
    line["fwd_ratio_cudnn"] = ratio(line["fwd"]["ours"], line["fwd"]["cudnn"])
    line["bwd_ratio_cudnn"] = ratio(line["bwd"]["ours"], line["bwd"]["cudnn"])
    line["bwd_ratio_fa2"] = ratio(line["bwd"]["ours"], line["bwd"]["fa2"])
    joined.append(line)
    f, b = line["fwd"], line["bwd"]
    table.append(f"| {d} | {s} | {'yes' if c else 'no'} | {f['ours']:.0f} | {f['cudnn']:.0f} | {f['fa2']:.0f} | {line['fwd_ratio_cudnn']:.2f} "
                 f"| {b['ours']:.0f} | {b['cudnn']:.0f} | {b['fa2']:.0f} | {line['bwd_ratio_cudnn']:.3f} | {line['bwd_ratio_fa2']:.3f} |")
json.dump(dict(gpu=gpu, rows=joined), open(sys.argv[3], "w"), indent=1)
open(sys.argv[4], "w").write("\n".join(table) + "\n")
print("\n".join(table))
