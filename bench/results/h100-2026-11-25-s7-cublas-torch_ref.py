# The CUDA C++ side of the comparison: PyTorch's cuBLAS / cuBLASLt calls for the same GEMMs
# (bf16, row-major x @ w.T == cuBLAS TN), timed the same way: 20 back-to-back calls per event
# pair, median of 5 batches.
import torch
for side in (4096, 512):
    x = torch.randn(side, side, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(side, side, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(side, device="cuda", dtype=torch.bfloat16)
    flop = 2 * side ** 3
    def time(what, fn):
        fn(); torch.cuda.synchronize()
        ms = []
        for _ in range(5):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(20):
                fn()
            e.record(); e.synchronize()
            ms.append(s.elapsed_time(e) / 20)
        ms.sort()
        print(f"torch {side}^3 {what}: {ms[2]:.4f} ms, {flop / (ms[2] * 1e-3) / 1e12:.1f} TFLOP/s (spread {(ms[4]-ms[0])/ms[2]*100:.1f}%)")
    time("bf16 x @ w.T (cuBLAS)", lambda: x @ w.t())
    time("bf16 _addmm_activation(bias, x, w.T, use_gelu=True) (cuBLASLt GELU_BIAS)", lambda: torch._addmm_activation(b, x, w.t(), use_gelu=True))
print(torch.__version__, torch.cuda.get_device_name())
