"""G20R-3: an array the DLPack functions already imported is re-pointed (its memory freed)
by Python code that runs later in the same call, and the kernel then uses the freed memory.

`import_all` calls each producer's `__dlpack__` in turn (inputs, then the output). Any of them
is arbitrary Python (a class of the user's, or a torch.Tensor subclass through
`__torch_function__`). The capsule holds the *tensor*, not its allocation: `x.resize_(..)`
(safe torch) swaps x's storage's data pointer and frees the old memory, which the earlier
import still points at. Safe Python only (no ctypes, no `refcheck=False`).

CPU arrays: the CPU executor's kernel reads freed host memory through a `&[f32]` (Rust UB in
the extension); here, after the free, a new tensor of the same size takes the chunk, so the
kernel reads its values. CUDA arrays: torch's caching allocator hands the block to the next
tensor at once, and the kernel reads that tensor.

Prints REPRODUCED / NOT REPRODUCED (exit 0 / 1), SKIPPED (exit 2).
"""
import sys

try:
    import torch
    import ferrocuda_torch as ft
except Exception as e:  # noqa: BLE001
    print(f"SKIPPED g20r3: {e}")
    sys.exit(2)


class Output:
    """A DLPack producer for `out` whose export re-points the input `victim` first."""

    def __init__(self, out, victim, device):
        self.out, self.victim, self.device, self.reuse = out, victim, device, None

    def __dlpack_device__(self):
        return self.out.__dlpack_device__()

    def __dlpack__(self, *args, **kwargs):
        n = self.victim.numel()
        old = self.victim.data_ptr()
        self.victim.resize_(64 * n)  # a new, larger allocation; the old one is freed now
        self.reuse = torch.full((n,), -7.0, device=self.device)  # likely the freed memory
        self.reused = self.reuse.data_ptr() == old
        return self.out.__dlpack__(*args, **kwargs)


def case(device, n):
    x = torch.full((n,), 1.0, device=device)
    y = torch.zeros((n,), device=device)
    out = Output(y, x, device)
    ft.dlpack.saxpy(2.0, x, out)  # y = 2 x + y: should be 2.0 everywhere
    if device == "cuda":
        ft.dlpack.release_pending(wait=True)
        torch.cuda.synchronize()
    wrong = (y != 2.0).sum().item()
    print(f"{device}: {wrong} of {n} outputs differ from 2.0 (y[0] = {y[0].item()}); freed block reused by another tensor: {out.reused}")
    return wrong


def guarded(device, n):
    try:
        return case(device, n)
    except Exception as e:  # noqa: BLE001
        print(f"{device}: the call was refused or failed: {type(e).__name__}: {e}")
        return 0


if len(sys.argv) > 1 and sys.argv[1] == "cpu-child":
    # 4 MiB: glibc maps it on its own (mmap), so the free unmaps it and the CPU executor's read
    # of the old address faults (SIGSEGV) instead of reading whatever the heap holds.
    sys.exit(3 if guarded("cpu", 1 << 20) > 0 else 0)

import subprocess  # noqa: E402

child = subprocess.run([sys.executable, __file__, "cpu-child"], capture_output=True, text=True, timeout=20)
print(child.stdout, end="")
tail = child.stderr.strip().splitlines()[-3:]
print(f"cpu (child process, CPU executor): exit status {child.returncode}" + (f"; stderr tail: {tail}" if tail else ""))
cpu_hit = child.returncode == 3 or child.returncode < 0  # 3: wrong values; negative: killed by a signal (-11: SIGSEGV)
results = [1 if cpu_hit else 0]
if torch.cuda.is_available():
    results.append(guarded("cuda", 1 << 20))
    print("device:", torch.cuda.get_device_name(0), "torch", torch.__version__)
if any(w > 0 for w in results):
    print("REPRODUCED g20r3: the kernel used memory freed (and reused or unmapped) after its array was imported")
    sys.exit(0)
print("NOT REPRODUCED g20r3")
sys.exit(1)
