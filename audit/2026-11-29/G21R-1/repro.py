"""G21R-1: a torch tensor's memory freed by another Python thread while a ferrocuda_torch call
reads it (safe Python only). The call reads the tensor's address with the GIL held and then
uses it, trusting that "a torch tensor's memory is freed only by Python code" and that no Python
code runs in between; but torch's own ops release the GIL while they work, so a `resize_` that
another thread started keeps running during the call: it copies the storage, then frees the old
memory the call is reading.

usage: python3 repro.py [attack|control] [seconds]
Needs torch and the ferrocuda_torch wheel (scripts/build-python-wheel.sh). Runs the calls in a
child process with MALLOC_MMAP_THRESHOLD_ fixed, so that glibc returns the freed 16 MiB to the
kernel (munmap) and the read of freed memory faults instead of reading stale data silently.
"""
import os
import subprocess
import sys
import threading
import time

N = 1 << 22  # 4M float32 = 16 MiB per tensor


def child(mode, seconds):
    import torch
    from ferrocuda_torch import dlpack as ft

    y = torch.zeros(N)
    holder = [torch.ones(N)]
    resizes = [0]

    def resizer():
        while True:
            x = torch.ones(N)
            # A second tensor on x's storage object (not a view: a plain tensor with set_).
            alias = torch.empty(0)
            alias.set_(x.untyped_storage(), 0, (N,), (1,))
            holder[0] = x
            if mode == "attack":
                # GIL released inside: grows the shared storage (allocate 64 MiB, copy 16 MiB,
                # free the old 16 MiB); x keeps its shape and numel, its data pointer moves.
                alias.resize_(4 * N)
            else:
                alias.add_(0.0)  # the same GIL release, no free of x's memory
            resizes[0] += 1

    threading.Thread(target=resizer, daemon=True).start()
    deadline = time.time() + seconds
    calls = 0
    while time.time() < deadline:
        ft.saxpy(2.0, holder[0], y)  # y = 2 x + y on the CPU executor (safe API)
        calls += 1
    print(f"{mode}: no crash after {calls} calls ({resizes[0]} storage swaps)", flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[3] == "child":
        child(sys.argv[1], float(sys.argv[2]))
        sys.exit(0)
    mode = sys.argv[1] if len(sys.argv) > 1 else "attack"
    seconds = sys.argv[2] if len(sys.argv) > 2 else "15"
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072")
    t0 = time.time()
    r = subprocess.run([sys.executable, __file__, mode, seconds, "child"], env=env)
    sig = f" (signal {-r.returncode})" if r.returncode < 0 else ""
    print(f"{mode}: child exit code {r.returncode}{sig} after {time.time() - t0:.1f} s", flush=True)
