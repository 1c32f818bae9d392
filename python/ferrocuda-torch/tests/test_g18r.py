"""Held-out review of session 18 (audit/2026-11-28f/FINDINGS-review.md), G18R-2: the DLPack
functions release the producer's capsule when the call returns, while the kernel they queued on
torch's current stream may still be running. A producer whose memory lives on a stream of its
own (CuPy, JAX, or any object with ``__dlpack__``) frees it then, and its next allocation on
that stream gets the same memory while our kernel still writes it: a write into another
array's memory (use after free), from Python code that only passed an array to a function.

Needs a CUDA GPU and torch; skips with the reason without them, fails under REQUIRE_GPU=1.
The test asserts the sound behaviour (the unrelated array keeps its values); while G18R-2 is
open it fails, printing what happened.
"""

import os
import unittest


def _gpu_or_skip(test):
    why = None
    try:
        import torch

        if not torch.cuda.is_available():
            why = "no CUDA device visible to torch"
    except ImportError as error:
        why = f"torch is not installed ({error})"
    if why is not None:
        if os.environ.get("REQUIRE_GPU") == "1":
            raise AssertionError(f"REQUIRE_GPU=1 but {test.id()} cannot run: {why}")
        raise unittest.SkipTest(why)


class Producer:
    """A DLPack producer that hands its only reference to the capsule, as a temporary
    array of another framework does (``ft.saxpy(a, x, cupy.zeros(n))``): its memory is freed
    when the consumer releases the capsule."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()

    def __dlpack__(self, stream=None):
        capsule = self.tensor.__dlpack__(stream=stream)
        self.tensor = None
        return capsule


class G18R2(unittest.TestCase):
    def test_g18r_2_dlpack_output_is_not_released_while_the_kernel_writes_it(self):
        _gpu_or_skip(self)
        import torch
        from ferrocuda_torch import dlpack as ft

        n = 1 << 22
        x = torch.ones(n, device="cuda")
        # Warm up: the first call loads the kernel module, which waits for the device (the one
        # GPU run of session 18 showed the reuse but no write because of it: the sleep below
        # had ended before the launch).
        ft.saxpy(1.0, x, torch.zeros(n, device="cuda"))
        torch.cuda.synchronize()
        producer_stream = torch.cuda.Stream()
        with torch.cuda.stream(producer_stream):
            y = torch.zeros(n, device="cuda")  # the producer's memory, from its stream's pool
        producer_stream.synchronize()
        address = y.data_ptr()
        producer = Producer(y)
        del y
        # Hold torch's current stream (where the kernel is queued) for about a second, so that
        # the kernel is still waiting when the call returns.
        torch.cuda._sleep(int(2e9))
        ft.saxpy(2.0, x, producer)  # y = 2 x + y, queued behind the sleep
        del producer
        # The producer's next array on its stream: the same memory, written now.
        with torch.cuda.stream(producer_stream):
            z = torch.full((n,), 7.0, device="cuda")
        producer_stream.synchronize()
        reused = z.data_ptr() == address
        with torch.cuda.stream(producer_stream):
            seen_before = z[:4].tolist()  # on the producer's stream: does not wait for the kernel
        torch.cuda.synchronize()
        seen_after = z[:4].tolist()
        print(f"G18R-2: z reuses y's memory: {reused}; z[:4] right after it was filled: {seen_before}; after the saxpy finished: {seen_after}")
        self.assertEqual(seen_after, [7.0] * 4, "G18R-2: the DLPack saxpy wrote into z, an array allocated after the call returned (the capsule of y was released while the kernel was queued)")


if __name__ == "__main__":
    unittest.main()
