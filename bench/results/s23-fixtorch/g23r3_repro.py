"""G23R-3 (audit 2026-11-29d): ferrocuda-torch's ops allocate their outputs with
`torch.empty_like` / `torch.empty` looked up *by name* (op.rs `py_empty_like`, `py_new_empty`,
cached at the first call), and trust what comes back: a "fresh" output's address alone is read
(`TensorInfo::fresh`), its element count, element size, device and layout are taken from the
input it is declared like, and `verify` skips it ("no Python code ran since"). The allocator
*is* Python code when `torch.empty_like` has been rebound (G21R-2's class: "nothing found by
name is trusted as found"), so plain Python (no ctypes) decides where the kernel writes.

Pure Python on the library's own op (`ferrocuda_torch.gelu`). Prints `G23R-3: UNSOUND` when the
kernel wrote a tensor that is not its output; exit status 2 without a GPU.
"""

import sys

import torch

if not torch.cuda.is_available():
    print("SKIPPED G23R-3: no CUDA device")
    sys.exit(2)

import ferrocuda_torch as ft  # noqa: E402

N = 1 << 20
x = torch.ones(N, device="cuda")
victim = torch.full((N,), 7.0, device="cuda")  # a tensor no op is given
torch.cuda.synchronize()

real_empty_like = torch.empty_like
# Before the first op call of the process (op.rs caches the first lookup): any wrapper a
# library installs (a profiler, a memory tracker) is called the same way.
torch.empty_like = lambda like, *args, **kwargs: victim[:1]
try:
    out = ft.gelu(x)
except Exception as e:  # a fix that checks what the allocator returned
    torch.empty_like = real_empty_like
    print(f"the op refused: {type(e).__name__}: {str(e).splitlines()[0]}")
    print("G23R-3:", "held (refused)" if bool((victim == 7.0).all()) else "UNSOUND (refused after writing)")
    sys.exit(0)
finally:
    torch.empty_like = real_empty_like
torch.cuda.synchronize()
changed = int((victim != 7.0).sum())
print(f"out: shape {tuple(out.shape)} at {out.data_ptr():#x}; victim at {victim.data_ptr():#x}: {changed} of {N} elements changed, "
      f"victim[:3] = {victim[:3].tolist()}, victim[-3:] = {victim[-3:].tolist()} (7.0 unless the kernel wrote it)")
print("G23R-3:", "UNSOUND (the kernel wrote N elements into a tensor it was not given)" if changed > 1 else "held")
