#!/usr/bin/env python3
"""PyTorch SDPA beside `hopper-attention`, in the same job on the same GPU.

1. Checks: for the problems `hopper-attention --dump DIR` wrote (B 1, H 4, S 1000, D 64/128,
   causal or not), our O against SDPA's (cuDNN backend) and both against a float64 reference
   (relative Frobenius norm).
2. Timings of SDPA's cuDNN and FlashAttention-2 backends on the shapes of `hopper-attention`
   (B*S = 16384, H*D = 2048, bf16, [B, H, S, D]), timed as `hopper-attention` times its kernels
   (CUDA events, median: isolated = one call per event pair, synchronised after each; steady =
   20 calls back to back per event pair), on fresh random inputs.
3. A table: ours (from its JSON) beside cuDNN and FA2, TFLOP/s and ratios.

usage: sdpa.py OURS_JSON DUMP_DIR OUT_JSON [--seq 512,...] [--runs 10]
"""
import json
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BATCH = 20


def timed(fn, runs):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    isolated, steady = [], []
    for i in range(runs + 2):
        start.record()
        fn()
        end.record()
        end.synchronize()
        if i >= 2:
            isolated.append(start.elapsed_time(end))
    for i in range(max(runs // 2, 5) + 1):
        start.record()
        for _ in range(BATCH):
            fn()
        end.record()
        end.synchronize()
        if i >= 1:
            steady.append(start.elapsed_time(end) / BATCH)
    return statistics.median(isolated), statistics.median(steady)


def load(path, shape, dtype=torch.bfloat16):
    data = open(path, "rb").read()
    return torch.frombuffer(bytearray(data), dtype=torch.int16).view(dtype).reshape(shape).cuda()


def rel(x, ref):
    return (torch.linalg.norm((x.double() - ref).flatten()) / torch.linalg.norm(ref.flatten())).item()


def main():
    ours_json, dump_dir, out_json = sys.argv[1:4]
    seqs, runs = [512, 1024, 2048, 4096, 8192, 16384], 10
    rest = sys.argv[4:]
    while rest:
        if rest[0] == "--seq":
            seqs = [int(s) for s in rest[1].split(",")]
        elif rest[0] == "--runs":
            runs = int(rest[1])
        rest = rest[2:]
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, cuDNN {torch.backends.cudnn.version()}")
    ok = True
    # 1. Checks against SDPA and float64.
    for d in (64, 128):
        shape = (1, 4, 1000, d)
        try:
            q, k, v = (load(f"{dump_dir}/d{d}.{x}", shape) for x in "qkv")
        except FileNotFoundError as why:
            print(f"FAIL no dump for d {d}: {why}")
            ok = False
            continue
        for causal in (False, True):
            ours = load(f"{dump_dir}/d{d}{'_causal' if causal else ''}.o", shape)
            ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                cudnn = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            ours_err, cudnn_err, between = rel(ours, ref), rel(cudnn, ref), rel(ours, cudnn.double())
            passed = ours_err < 1e-2 and ours_err < 3 * cudnn_err + 1e-3
            ok &= passed
            print(
                f"{'PASS' if passed else 'FAIL'} d {d} causal {causal} S 1000: ours vs f64 rel {ours_err:.2e}, "
                f"SDPA cuDNN vs f64 rel {cudnn_err:.2e}, ours vs SDPA cuDNN rel {between:.2e}"
            )
    # 2. Timings.
    results = []
    for d in (64, 128):
        for s in seqs:
            b, h = max(16384 // s, 1), 2048 // d
            q, k, v = (torch.rand(b, h, s, d, device="cuda", dtype=torch.bfloat16) * 2 - 1 for _ in range(3))
            for causal in (False, True):
                flop = 4 * b * h * s * s * d / (2 if causal else 1)
                for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash2", SDPBackend.FLASH_ATTENTION)):
                    try:
                        with sdpa_kernel(backend):
                            fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                            fn()
                            torch.cuda.synchronize()
                            iso, st = timed(fn, runs)
                    except RuntimeError as why:
                        print(f"SKIP SDPA {name} d {d} S {s} causal {causal}: {str(why).splitlines()[0]}")
                        continue
                    results.append(dict(backend=name, d=d, seq=s, causal=causal, batch=b, heads=h, isolated_ms=iso, steady_ms=st,
                                        isolated_tflops=flop / iso / 1e9, steady_tflops=flop / st / 1e9))
    json.dump(results, open(out_json, "w"), indent=1)
    # 3. The table.
    try:
        ours = json.load(open(ours_json))
    except (OSError, ValueError) as why:
        print(f"no hopper-attention results ({why}); SDPA alone:")
        ours = []
    sdpa = {(r["backend"], r["d"], r["seq"], r["causal"]): r for r in results}
    print("\nTFLOP/s, steady state (20 back-to-back launches per event pair); isolated launches in brackets")
    print("ratios: the best of our schedules (steady) over cuDNN's and FA2's (steady)")
    print(f"{'D':>4} {'causal':>6} {'S':>6} | {'serial':>15} {'overlap':>15} {'pingpong':>15} {'overlap s3':>15} {'pingpong s3':>15} | {'cuDNN':>15} {'FA2':>15} | {'/cuDNN':>6} {'/FA2':>6}")
    keys = sorted({(r["d"], r["causal"], r["seq"]) for r in ours})
    for d, causal, seq in keys:
        mine = {r["schedule"]: r for r in ours if (r["d"], r["causal"], r["seq"]) == (d, causal, seq)}
        best = max(mine.values(), key=lambda x: x["steady_tflops"])
        cudnn, fa2 = sdpa.get(("cudnn", d, seq, causal)), sdpa.get(("flash2", d, seq, causal))
        cell = lambda x: f"{x['steady_tflops']:6.1f} [{x['isolated_tflops']:6.1f}]" if x else f"{'-':>15}"
        ratio = lambda x: f"{best['steady_tflops'] / x['steady_tflops']:6.2f}" if x else f"{'-':>6}"
        row = " ".join(cell(mine.get(k)) for k in ("serial", "overlap", "pingpong", "s3", "pingpong_s3"))
        print(f"{d:>4} {str(causal):>6} {seq:>6} | {row} | {cell(cudnn)} {cell(fa2)} | {ratio(cudnn)} {ratio(fa2)}")
    print("sdpa.py:", "all checks passed" if ok else "a check FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
