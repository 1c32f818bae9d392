"""The DLPack functions: float32 arrays of any DLPack producer (torch tensors, NumPy arrays,
CuPy, JAX), written into a preallocated output; CUDA arrays run on torch's current stream, host
arrays on ferrocuda's CPU executor. Refused inside a CUDA graph capture (use the ops of the
package for that). At most one argument of a call may be an array other than a
``torch.Tensor`` or ``numpy.ndarray`` (another producer's ``__dlpack__`` runs Python code, which
could free an array already taken; convert the others first, e.g. ``torch.from_dlpack(x)``).

A CUDA call returns once its kernel is queued. The producers' arrays (their DLPack capsules,
which let the producer free the memory when dropped) are kept until the kernel has completed
on the GPU, not just until the call returns: a producer that frees on a stream of its own
would otherwise hand the memory to its next array while the kernel still writes it. They are
released, without blocking, at the start of every later call once their kernel is done, or by
:func:`release_pending`; :func:`pending` counts what is held. At interpreter exit the package
waits for the held work and releases it.
"""

import atexit
import sys

from . import _C

saxpy = _C.dlpack_saxpy
rms_norm = _C.dlpack_rms_norm
softmax = _C.dlpack_softmax
last_launch = _C.last_launch
pending = _C.dlpack_pending
"""``pending() -> int``: the number of arrays the DLPack functions still hold because the GPU
work of their calls had not been seen complete."""
release_pending = _C.dlpack_release_pending
"""``release_pending(wait=False) -> int``: releases the arrays whose GPU work has completed;
with ``wait=True`` waits for all held work first (the GIL released meanwhile). Returns how many
arrays are still held."""


def _release_at_exit():
    # Waits for the held kernels, then lets the producers free their memory (their deleters may
    # need CUDA and Python, both still up in an atexit hook).
    left = release_pending(wait=True)
    if left:
        print(
            f"ferrocuda_torch.dlpack: {left} array(s) still held at exit: the wait for their GPU "
            "work failed (a CUDA error, or a capture in progress); not handed back to their producers",
            file=sys.stderr,
        )


atexit.register(_release_at_exit)
