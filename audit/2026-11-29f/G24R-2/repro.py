"""G24R-2 (audit 2026-11-29f): nested `Call::with`s lend overlapping slices to one launch.

`Call::with` refuses an output that overlaps another argument of the *same* call
(`check_tensors`). An op author's closure may open a second `Call::with` (nothing refuses it) and
pass the outer call's input slice and the inner call's output slice to one launch: the kernel then
gets a `&[f32]` and a `DisjointSlice<f32>` over the same memory, i.e. a shared reference whose
memory other threads of the same kernel write (read with `ld.global.nc`, which the PTX ISA leaves
undefined for memory written during the kernel), and a data race between the thread that writes
`t[i+1]` and the thread that reads it.

The op crate (./op, safe Rust only) has `one_call` (the control: refused) and `nested_calls`.
Prints UNSOUND when the nested launch of overlapping slices was accepted.

Run (GPU machine): PYTHONPATH=<unpacked g24r2 wheel> python3 repro.py
"""

import torch

# Not `import ferrocuda_torch` (G23L-1: two extensions on the glue in one process); the op crate carries its own copy.
import g24r2_op

N = 1 << 20


def case(name, x, y, out, f):
    try:
        f(x, y, out, 2.0)
        torch.cuda.synchronize()
        return "launched"
    except (ValueError, RuntimeError) as error:
        return "refused: " + str(error).splitlines()[0][:160]


t = torch.ones(N + 1, device="cuda")
y = torch.zeros(N, device="cuda")
print("one call, out = t[1:] over x = t[:-1]:", case("one", t[:-1], y, t[1:], g24r2_op.one_call))
t.fill_(1.0)
got = case("nested", t[:-1], y, t[1:], g24r2_op.nested_calls)
print("nested calls, the same arguments:", got)
if got == "launched":
    # Sequentially out[i] = 2 * x[i] with x[i] read before any write: every t[1:] is 2.0. A 4.0 (or
    # more) is a t[i] read after the thread of t[i] wrote it: the race, seen.
    raced = 0
    for _ in range(50):
        t.fill_(1.0)
        g24r2_op.nested_calls(t[:-1], y, t[1:], 2.0)
        torch.cuda.synchronize()
        raced += int((t[1:] != 2.0).sum().item())
    print("elements that read another thread's write, over 50 launches of %d:" % N, raced)
    same = torch.ones(N, device="cuda")
    print("nested calls, x and out the same tensor:", case("same", same, y, same, g24r2_op.nested_calls))
    print("UNSOUND - one launch took an input slice and an output slice of the same memory (refused within one call)")
else:
    print("HELD")
