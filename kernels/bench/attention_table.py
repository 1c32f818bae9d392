"""Joins the JSON lines of bench_attention (ours) and attention_sdpa.py (cuDNN, FA2) into one
JSON file, a Markdown table (TFLOP/s forward and backward, ours / cuDNN, ours / FA2; the
forward's other sm_90 instance, persistent or one tile per block, in its own columns when the
benchmark timed it) and a picture of it: an SVG beside the table (same name, `.svg`), TFLOP/s
against the sequence length, ours beside cuDNN and FA2, forward and backward, one panel per
head dimension and mask. Plain Python (no packages), so it runs on the GPU machine.
Usage: attention_table.py ours.jsonl sdpa.jsonl out.json out.md [gpu name]
       attention_table.py --svg table.json out.svg   (redraws the picture from a joined JSON)"""
import json
import math
import os
import sys

SERIES = (("ours", "ours", "#d62728"), ("cudnn", "cuDNN", "#1f77b4"), ("fa2", "FA2", "#2ca02c"))


def svg(joined, gpu):
    """The picture of `joined` (the rows of the joined JSON) as SVG text: a column per (head
    dim, causal), a row for the forward and one for the backward; x the sequence length (log 2
    scale), y TFLOP/s from 0."""
    panels = sorted({(r["head_dim"], r["causal"]) for r in joined}, key=lambda p: (-p[0], p[1]))
    seqs = sorted({r["seq"] for r in joined})
    w, h, left, top, gap = 250, 190, 60, 60, 30
    width = left + len(panels) * (w + gap) + 10
    height = top + 2 * (h + gap + 30) + 20
    top_value = max([r[p][s] for r in joined for p in ("fwd", "bwd") for s, _, _ in SERIES if r[p][s] == r[p][s]] + [1.0])
    y_max = 100 * math.ceil(top_value / 100)
    lo, hi = math.log2(seqs[0]), math.log2(seqs[-1])
    x_of = lambda s: (math.log2(s) - lo) / (hi - lo) if hi > lo else 0.5
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="20" font-size="14">Attention, bf16 [B, H, S, D], B·S = 16k, H·D = 2048: TFLOP/s on one {escape(gpu)}</text>']
    for i, (name, label, color) in enumerate(SERIES):
        x = left + 150 * i
        out.append(f'<line x1="{x}" y1="38" x2="{x + 24}" y2="38" stroke="{color}" stroke-width="2"/>'
                   f'<circle cx="{x + 12}" cy="38" r="3" fill="{color}"/><text x="{x + 30}" y="42">{label}</text>')
    for row, (part, title) in enumerate((("fwd", "forward"), ("bwd", "backward"))):
        for col, (d, causal) in enumerate(panels):
            x0, y0 = left + col * (w + gap), top + row * (h + gap + 30) + 20
            out.append(f'<text x="{x0}" y="{y0 - 6}" font-size="12">{title}, D {d}{", causal" if causal else ""}</text>')
            out.append(f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#999"/>')
            for tick in range(0, y_max + 1, 100):
                y = y0 + h - h * tick / y_max
                out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + w}" y2="{y:.1f}" stroke="#eee"/>')
                out.append(f'<text x="{x0 - 4}" y="{y + 4:.1f}" text-anchor="end">{tick}</text>')
            for s in seqs:
                x = x0 + 10 + (w - 20) * x_of(s)
                out.append(f'<text x="{x:.1f}" y="{y0 + h + 14}" text-anchor="middle">{s // 1024}k</text>' if s >= 1024 else
                           f'<text x="{x:.1f}" y="{y0 + h + 14}" text-anchor="middle">{s}</text>')
            rows = sorted((r for r in joined if (r["head_dim"], r["causal"]) == (d, causal)), key=lambda r: r["seq"])
            for name, label, color in SERIES:
                points = [(x0 + 10 + (w - 20) * x_of(r["seq"]), y0 + h - h * r[part][name] / y_max, r[part][name], r["seq"])
                          for r in rows if r[part][name] == r[part][name]]
                if len(points) > 1:
                    path = " ".join(f"{x:.1f},{y:.1f}" for x, y, _, _ in points)
                    out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
                for x, y, value, s in points:
                    out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"><title>{label} S {s}: {value:.0f} TFLOP/s</title></circle>')
        out.append(f'<text x="14" y="{top + row * (h + gap + 30) + 20 + h / 2:.0f}" transform="rotate(-90 14 '
                   f'{top + row * (h + gap + 30) + 20 + h / 2:.0f})" text-anchor="middle">TFLOP/s</text>')
    out.append(f'<text x="{left}" y="{height - 6}">sequence length S (backward FLOPs = 2.5 x forward)</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def escape(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


if len(sys.argv) == 4 and sys.argv[1] == "--svg":
    data = json.load(open(sys.argv[2]))
    open(sys.argv[3], "w").write(svg(data["rows"], data.get("gpu", "GPU")))
    sys.exit(0)

rows = [json.loads(line) for path in sys.argv[1:3] for line in open(path) if line.strip()]
by = {(r["impl"], r["head_dim"], r["seq"], r["causal"]): r for r in rows}
keys = sorted({(r["head_dim"], r["seq"], r["causal"]) for r in rows}, key=lambda k: (-k[0], k[2], k[1]))
twins = any("fwd_twin_tflops" in r for r in rows)
# The backward's trial instance (`_late_lpt` or, since session 17, `_persistent`); runs before
# session 17 wrote it as `bwd_late_lpt_*`.
trial_of = lambda r: (r.get("bwd_trial_path", "_late_lpt").replace("attention_backward", ""), r.get("bwd_trial_tflops", r.get("bwd_late_lpt_tflops", float("nan"))))
trials = any("bwd_trial_tflops" in r or "bwd_late_lpt_tflops" in r for r in rows)
table, joined = [], []
gpu = sys.argv[5] if len(sys.argv) > 5 else "GPU"
table.append(f"Attention, bf16 `[B, H, S, D]`, B·S = 16k, H·D = 2048, TFLOP/s on one {gpu} (backward FLOPs = 2.5 x forward; "
             "SDPA backward = (fwd+bwd) - fwd)" + ("; fwd twin: the forward's other sm_90 instance (persistent or one tile per block)" if twins else "")
             + ("; bwd trial: the backward's trial instance (`_late_lpt` causal, `_persistent` otherwise)" if trials else "") + "\n")
twin_head, twin_rule = (" fwd twin | twin/cuDNN |", "---|---|") if twins else ("", "")
trial_head, trial_rule = (" bwd trial | trial/cuDNN |", "---|---|") if trials else ("", "")
table.append(f"| D | S | causal | fwd ours | fwd cuDNN | fwd FA2 | ours/cuDNN |{twin_head} bwd ours | bwd cuDNN | bwd FA2 | ours/cuDNN | ours/FA2 |{trial_head}")
table.append(f"|---|---|---|---|---|---|---|{twin_rule}---|---|---|---|---|{trial_rule}")
for d, s, c in keys:
    o, cu, fa = (by.get((i, d, s, c)) for i in ("ours", "cudnn", "fa2"))
    if not o and d != 256:
        continue
    # D 256 (no sm_90 kernel; ours timed only up to BENCH_D256_MAX_S): cuDNN and FA2 reported.
    o = o or dict(fwd_tflops=float("nan"), bwd_tflops=float("nan"))
    get = lambda r, f: r[f] if r else float("nan")
    ratio = lambda a, b: a / b if b and b == b else float("nan")
    line = dict(head_dim=d, seq=s, causal=c,
                fwd=dict(ours=o["fwd_tflops"], cudnn=get(cu, "fwd_tflops"), fa2=get(fa, "fwd_tflops")),
                bwd=dict(ours=o["bwd_tflops"], cudnn=get(cu, "bwd_tflops"), fa2=get(fa, "bwd_tflops")),
                fwd_path=o.get("fwd_path"), bwd_path=o.get("bwd_path"))
    line["fwd_ratio_cudnn"] = ratio(line["fwd"]["ours"], line["fwd"]["cudnn"])
    line["bwd_ratio_cudnn"] = ratio(line["bwd"]["ours"], line["bwd"]["cudnn"])
    line["bwd_ratio_fa2"] = ratio(line["bwd"]["ours"], line["bwd"]["fa2"])
    twin = ""
    if twins:
        t = o.get("fwd_twin_tflops", float("nan"))
        line["fwd_twin"] = dict(path=o.get("fwd_twin_path"), tflops=t, ratio_cudnn=ratio(t, line["fwd"]["cudnn"]))
        twin = f" {t:.0f} | {line['fwd_twin']['ratio_cudnn']:.2f} |"
    trial = ""
    if trials:
        path, t = trial_of(o)
        line["bwd_trial"] = dict(path=path, tflops=t, ratio_cudnn=ratio(t, line["bwd"]["cudnn"]))
        trial = f" {t:.0f} | {line['bwd_trial']['ratio_cudnn']:.3f} |" if t == t else " | |"
    joined.append(line)
    f, b = line["fwd"], line["bwd"]
    table.append(f"| {d} | {s} | {'yes' if c else 'no'} | {f['ours']:.0f} | {f['cudnn']:.0f} | {f['fa2']:.0f} | {line['fwd_ratio_cudnn']:.2f} |{twin}"
                 f" {b['ours']:.0f} | {b['cudnn']:.0f} | {b['fa2']:.0f} | {line['bwd_ratio_cudnn']:.3f} | {line['bwd_ratio_fa2']:.3f} |{trial}")
json.dump(dict(gpu=gpu, rows=joined), open(sys.argv[3], "w"), indent=1)
open(sys.argv[4], "w").write("\n".join(table) + "\n")
open(os.path.splitext(sys.argv[4])[0] + ".svg", "w").write(svg(joined, gpu))
print("\n".join(table))
print(f"picture: {os.path.splitext(sys.argv[4])[0]}.svg")
