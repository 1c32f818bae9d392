"""G23R-1 (audit 2026-11-29d): an op author's safe Rust runs Python code, or lets the GIL go,
between ferrocuda-torch's final read of a tensor's address and the launch, so the kernel uses
memory torch has freed and handed to another tensor. Needs a CUDA GPU and the `g23r1_op`
extension (python/ferrocuda-torch/tests/g23r_op, session 23).

Each case prints one line `CASE <name>: ...` and a verdict, `UNSOUND` when the kernel wrote or
read another tensor's memory, `held` otherwise. Exit status 0 either way (the verdicts are the
result); 2 without a GPU.
"""

import sys
import threading
import time

import torch

if not torch.cuda.is_available():
    print("SKIPPED G23R-1: no CUDA device")
    sys.exit(2)

import g23r_op as g23r1_op  # noqa: E402  (registers torch.ops.g23r1.*)

N = 1 << 20  # 4 MiB of f32: torch's large pool, a freed block is handed to the next such tensor
dev = "cuda"


def grab(address, keep):
    """Allocates tensors of 7.0 (up to 16, all kept in `keep`) until one lands at `address`, the
    block just freed; returns that one, or the last."""
    for _ in range(16):
        v = torch.full((N,), 7.0, device=dev)
        keep.append(v)
        if v.data_ptr() == address:
            break
    return keep[-1]


def fresh():
    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # earlier cases' free segments go: the freed block is the candidate


def case_call_new_hook_frees_output():
    """`Call::new`, slices taken, a Python hook (`out`'s memory freed, another tensor made),
    then the launch: the kernel writes the other tensor."""
    fresh()
    x = torch.ones(N, device=dev)
    y = torch.ones(N, device=dev)
    out = torch.zeros(N, device=dev)
    torch.cuda.synchronize()
    old = out.data_ptr()
    victim = []

    def hook():
        out.untyped_storage().resize_(0)  # frees out's memory (the Call holds the tensor, not the memory)
        grab(old, victim)  # torch's allocator hands the freed block to a new tensor

    g23r1_op.scale_add_into(x, y, out, 2.0, hook)
    torch.cuda.synchronize()
    v = victim[-1]
    same = v.data_ptr() == old
    seven = bool((v == 7.0).all())
    print(f"CASE call_new_hook: victim at the freed output's address: {same}; victim[:3] = {v[:3].tolist()} (torch wrote 7.0)")
    return "UNSOUND" if not seven else "held"


def case_op_hook_frees_input():
    """An `Op`'s launch closure calls Python (`Python::attach`) after taking its slices: the
    hook frees `x`'s memory and makes another tensor there; the kernel reads that one."""
    fresh()
    x = torch.ones(N, device=dev)
    y = torch.ones(N, device=dev)
    torch.cuda.synchronize()
    old = x.data_ptr()
    victim = []

    def hook():
        x.untyped_storage().resize_(0)
        grab(old, victim)

    g23r1_op.set_hook(hook)
    out = torch.ops.g23r1.scale_add_hook(x, y, 2.0)
    torch.cuda.synchronize()
    v = victim[-1]
    print(f"CASE op_hook: victim at x's freed address: {v.data_ptr() == old}; out[:3] = {out[:3].tolist()} (2 * x + y = 3.0 if x were read)")
    return "UNSOUND" if bool((out == 15.0).all()) or not bool((out == 3.0).all()) else "held"


def case_op_detach_other_thread_frees_input():
    """The launch closure only lets the GIL go (`py.detach(|| sleep)`, nothing captured: the
    `!Send` slices stay on its stack); another Python thread frees `x` meanwhile."""
    fresh()
    x = torch.ones(N, device=dev)
    y = torch.ones(N, device=dev)
    torch.cuda.synchronize()
    old = x.data_ptr()
    victim = []

    def other():
        time.sleep(0.1)  # the op is inside its detach by then (300 ms)
        x.untyped_storage().resize_(0)
        grab(old, victim)

    t = threading.Thread(target=other)
    t.start()
    out = torch.ops.g23r1.scale_add_detach(x, y, 2.0)
    t.join()
    torch.cuda.synchronize()
    v = victim[-1] if victim else None
    at = v is not None and v.data_ptr() == old
    print(f"CASE op_detach: victim at x's freed address: {at}; out[:3] = {out[:3].tolist()} (3.0 if x were read)")
    return "UNSOUND" if not bool((out == 3.0).all()) else "held"


def case_call_new_hook_returns_output_to_the_driver():
    """As the first case, but the hook also empties torch's cache (`cudaFree` of the block):
    the kernel writes memory no longer mapped (run last: the fault ends the CUDA context).
    16 MiB tensors: torch gives each its own segment, so the freed one is returned whole (with
    4 MiB ones, the mid-session run's, `out` shared a segment with live tensors and stayed
    mapped)."""
    fresh()
    big = 1 << 22
    x = torch.ones(big, device=dev)
    y = torch.ones(big, device=dev)
    out = torch.zeros(big, device=dev)
    torch.cuda.synchronize()

    def hook():
        out.untyped_storage().resize_(0)
        torch.cuda.empty_cache()

    g23r1_op.scale_add_into(x, y, out, 2.0, hook)
    try:
        torch.cuda.synchronize()
    except Exception as e:
        print(f"CASE freed_to_driver: the launch ran on freed memory: {type(e).__name__}: {str(e).splitlines()[0]}")
        return "UNSOUND"
    print("CASE freed_to_driver: no fault (the block stayed mapped)")
    return "held"


if len(sys.argv) > 1 and sys.argv[1] == "fault":
    verdict = case_call_new_hook_returns_output_to_the_driver()
    print(f"G23R-1 case_call_new_hook_returns_output_to_the_driver: {verdict}")
    sys.exit(0)

results = {}
for case in (case_call_new_hook_frees_output, case_op_hook_frees_input, case_op_detach_other_thread_frees_input):
    try:
        results[case.__name__] = case()
    except Exception as e:  # a refusal by ferrocuda is a "held"
        print(f"CASE {case.__name__}: raised {type(e).__name__}: {e}")
        results[case.__name__] = "held (raised)"
for name, verdict in results.items():
    print(f"G23R-1 {name}: {verdict}")
