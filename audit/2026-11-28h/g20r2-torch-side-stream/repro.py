"""G20R-2: a ferrocuda torch op reads an input that torch's caching allocator has already
handed to another tensor.

The op queues its kernel on torch's *current* stream and lets go of the input tensors when the
call returns (`Call::_keep`). An input allocated on another stream goes back to that stream's
pool as soon as Python drops it, and torch reuses the block there at once, in *that* stream's
order, not after our kernel. Nothing here is unsafe in Python terms (no ctypes, no raw
pointers); the DLPack functions hold their arrays until the kernel completes (G18R-2's fix),
the ops path does not.

Prints REPRODUCED / NOT REPRODUCED (exit 0 / 1), SKIPPED (exit 2). The control runs the same
sequence with `tensor.record_stream(current)` (what torch asks of its own users), which must
give the right answer.
"""
import sys

try:
    import torch
    import ferrocuda_torch as ft
except Exception as e:  # noqa: BLE001
    print(f"SKIPPED g20r2: {e}")
    sys.exit(2)
if not torch.cuda.is_available():
    print("SKIPPED g20r2: no CUDA device")
    sys.exit(2)

N = 1 << 24  # 64 MiB of float32

# Warm-up: the first call of the process loads the kernel module, which waits for the device
# (audit 2026-11-28f, G18R-2's first GPU run: the sleep ended before the launch).
ft.gelu(torch.ones(1024, device="cuda"))
torch.nn.functional.gelu(torch.ones(1024, device="cuda"), approximate="tanh")
torch.cuda.synchronize()
SLEEP = 200_000_000  # cycles: ~0.1 s of a spinning kernel on the current stream


def run(op, record_stream: bool):
    current = torch.cuda.current_stream()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        x = torch.full((N,), 0.5, device="cuda")  # allocated on the side stream
    current.wait_stream(side)
    address = x.data_ptr()
    torch.cuda._sleep(SLEEP)  # the current stream is busy: our kernel starts late
    y = op(x)  # queued on the current stream, behind the sleep
    if record_stream:
        x.record_stream(current)  # the control: torch's rule for cross-stream use
    del x  # back to the side stream's pool
    with torch.cuda.stream(side):
        z = torch.empty((N,), device="cuda")  # the same block, if torch reuses it
        z.fill_(-7.0)  # runs now on the side stream, while the current stream still sleeps
    torch.cuda.synchronize()
    expected = op(torch.full((N,), 0.5, device="cuda"))
    torch.cuda.synchronize()
    wrong = (y != expected).sum().item()
    return wrong, z.data_ptr() == address


results = {}
for name, op in [("ft.gelu", ft.gelu), ("torch gelu (same pattern, torch's own op)", lambda t: torch.nn.functional.gelu(t, approximate="tanh"))]:
    for record in (False, True):
        wrong, reused = run(op, record)
        results[(name, record)] = wrong
        print(f"{name}, record_stream={record}: {wrong} of {N} outputs wrong; block reused by the side stream: {reused}")

print("device:", torch.cuda.get_device_name(0), "torch", torch.__version__)
if results[("ft.gelu", False)] > 0 and results[("ft.gelu", True)] == 0:
    print("REPRODUCED g20r2: ft.gelu's kernel read an input that torch had reused for another tensor")
    sys.exit(0)
print("NOT REPRODUCED g20r2")
sys.exit(1)
