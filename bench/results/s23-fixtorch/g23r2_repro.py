"""G23R-2 (audit 2026-11-29d): ferrocuda-torch's `Call::stream()` is a stream of
`Stream::from_raw_in_owner_captures`, whose unsafe contract says that work queued on it during
the owner's capture uses "never a ferrocuda DeviceBuffer, module global or library work area";
`Call` hands it to the op author's safe launch closure, which can queue anything there. Inside
`torch.cuda.graph` the kernel is recorded into torch's graph and the buffer's use is not
tracked (the door skips captured work), so the buffer can be dropped (freed at once) and
`g.replay()`, safe Python, writes where it was. Uses the `g23r1_op` extension
(../G23R-1/torch-op-hook, built with maturin: see FINDINGS.md).

Prints `G23R-2: UNSOUND` when the replay wrote into a buffer allocated after the scratch was
freed, `held` otherwise. Exit status 2 without a GPU.
"""

import sys

import torch

if not torch.cuda.is_available():
    print("SKIPPED G23R-2: no CUDA device")
    sys.exit(2)

import g23r_op as g23r1_op  # noqa: E402

N = 1 << 20
x = torch.ones(N, device="cuda")
y = torch.ones(N, device="cuda")
scratch = g23r1_op.alloc_scratch(N)
out = torch.ops.g23r1.scale_add_scratch(x, y, 2.0)  # warm-up: loads the module before the capture
torch.cuda.synchronize()

g = torch.cuda.CUDAGraph()
try:
    with torch.cuda.graph(g):
        out = torch.ops.g23r1.scale_add_scratch(x, y, 2.0)
    torch.cuda.synchronize()
except Exception as e:  # a fix that refuses ferrocuda memory in torch's capture
    print(f"the capture was refused: {type(e).__name__}: {str(e).splitlines()[0]}")
    print("G23R-2: held (refused)")
    sys.exit(0)

g23r1_op.free_scratch()  # ferrocuda frees it: nothing recorded the graph's use
victim = g23r1_op.alloc_victim(N, scratch)  # 7.0 everywhere; up to 16 tries for the freed address
print(f"scratch at {scratch:#x}, victim at {victim:#x} (same address: {scratch == victim})")
before = g23r1_op.read_victim(4)
g.replay()  # safe Python: the captured kernel writes 2 * 1 + 1 = 3.0 at the scratch's address
try:
    torch.cuda.synchronize()
except Exception as e:
    print(f"replay faulted: {type(e).__name__}: {str(e).splitlines()[0]}")
    print("G23R-2: UNSOUND (the replay used freed memory)")
    sys.exit(0)
after = g23r1_op.read_victim(4)
print(f"victim before the replay {before}, after {after} (a kernel that wrote only the op's tensors leaves 7.0)")
print("G23R-2:", "UNSOUND" if after != before else "held (the victim was not at the freed address; the replay wrote freed memory all the same)")
