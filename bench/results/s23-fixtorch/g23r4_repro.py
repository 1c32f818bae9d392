"""G23R-4 (audit 2026-11-29d): `ferrocuda_torch::glue::Call::new` is public and safe, and the
`Call` restores process-wide state in its destructor: the cyclic garbage collector it paused
(`GcPaused`), and the thread's current context it pushed (`CurrentGuard`). `mem::forget` (safe)
skips both, so the collector stays off for the rest of the process: every later reference
cycle is kept, and nothing says so. (The scope form, which cudarc's borrowing uses for the
same reason (P3), would not have this.) Uses `g23r1_op.forget_call`
(../G23R-1/torch-op-hook). Prints `G23R-4: UNSOUND` when the collector is left off.
"""

import gc
import sys
import weakref

import torch

if not torch.cuda.is_available():
    print("SKIPPED G23R-4: no CUDA device")
    sys.exit(2)

import g23r_op as g23r1_op  # noqa: E402

gc.enable()
x = torch.ones(16, device="cuda")
out = torch.empty(16, device="cuda")
before = gc.isenabled()
try:
    g23r1_op.forget_call(x, out)
except Exception as e:
    print(f"forget_call raised: {type(e).__name__}: {e}")
after = gc.isenabled()


class Node:
    pass


node = Node()
node.me = node  # a cycle: only the collector frees it
ref = weakref.ref(node)
del node
for _ in range(200_000):  # allocations that run the collector when it is on
    [[], []]
freed = ref() is None
gc.enable()  # repair, for whatever runs after this script in the process
print(f"collector on before the call: {before}; after the forgotten Call: {after}; a later cycle freed automatically: {freed}")
print("G23R-4:", "UNSOUND (an invisible leak: the collector stays off after mem::forget of a Call)" if before and not after else "held")
