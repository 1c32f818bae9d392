"""How long the DLPack functions hold a producer's array (G18R-2, audit 2026-11-28f): host
arrays until the call returns, CUDA arrays until the call's kernel has completed on the GPU
(parked, counted by ``dlpack.pending()``, released at a later call or by
``dlpack.release_pending``), and never during a graph capture, which is refused before any
producer's ``__dlpack__`` runs.

``NoGpu`` runs everywhere NumPy is (CI: scripts/check-python.sh, NumPy on the CPU executor). ``Gpu``
needs torch and a CUDA device: it skips with the reason without them and fails under
REQUIRE_GPU=1. unittest style, so that it runs where pytest is not installed too.
"""

import ctypes
import gc
import os
import subprocess
import sys
import unittest
import weakref

try:
    import numpy as np
except ImportError:  # a GPU machine's torch environment without NumPy: the NoGpu tests skip
    np = None

import ferrocuda_torch
from ferrocuda_torch import dlpack as ft


class Producer:
    """A DLPack producer that hands its only reference to the capsule (a temporary array of
    another framework): the array dies when the consumer releases the capsule. Counts its
    ``__dlpack__`` calls."""

    def __init__(self, array, device=None):
        self.array = array
        self.device = device
        self.exports = 0

    def __dlpack_device__(self):
        return self.device if self.device is not None else self.array.__dlpack_device__()

    def __dlpack__(self, stream=None):
        self.exports += 1
        array, self.array = self.array, None
        # NumPy refuses a stream argument (host memory): the CUDA-claiming liar below passes one.
        return array.__dlpack__() if np is not None and isinstance(array, np.ndarray) else array.__dlpack__(stream=stream)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


def fake_capsule(device_type, n):
    """A 'dltensor' capsule of `n` float32s of host memory that claims `device_type`; no
    deleter (the memory is the returned keep-alive's). Returns (capsule, keep-alive)."""
    data = (ctypes.c_float * n)()
    shape = (ctypes.c_int64 * 1)(n)
    managed = _DLManagedTensor()
    managed.dl_tensor.data = ctypes.cast(data, ctypes.c_void_p)
    managed.dl_tensor.device = _DLDevice(device_type, 0)
    managed.dl_tensor.ndim = 1
    managed.dl_tensor.dtype = _DLDataType(2, 32, 1)
    managed.dl_tensor.shape = shape
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    capsule = new(ctypes.addressof(managed), b"dltensor", None)
    return capsule, (data, shape, managed)


class NoGpu(unittest.TestCase):
    def setUp(self):
        if np is None:
            raise unittest.SkipTest("NumPy is not installed (scripts/check-python.sh installs it)")
        # GPU tests run before in one process may leave their last call held: waited for and
        # released here (without a GPU nothing is held and no driver call is made).
        self.assertEqual(ft.release_pending(wait=True), 0)

    def test_g18r_2_host_arrays_are_released_when_the_call_returns(self):
        # The CPU executor has finished with the arrays when the call returns: nothing parked,
        # the capsule (and so the array) gone at once.
        y = np.zeros(64, dtype=np.float32)
        alive = weakref.ref(y)
        producer = Producer(y)
        del y
        ft.saxpy(2.0, np.ones(64, dtype=np.float32), producer)
        del producer
        gc.collect()
        self.assertIsNone(alive(), "the host array's capsule was kept after the call")
        self.assertEqual(ft.pending(), 0)

    def test_g18r_2_the_pending_count_and_release_are_public(self):
        self.assertEqual(ft.pending(), 0)
        self.assertEqual(ft.release_pending(), 0)
        self.assertEqual(ft.release_pending(wait=True), 0)
        self.assertIs(ferrocuda_torch.dlpack_pending, ft.pending)
        self.assertIs(ferrocuda_torch.dlpack_release_pending, ft.release_pending)

    def test_g20r_3_a_second_foreign_producer_is_refused_before_any_export(self):
        # A producer's __dlpack__ is Python code, which could free an array exported before it
        # (audit 2026-11-28h, G20R-3): one per call, exported before the NumPy arrays and torch
        # tensors are read; a second is refused before any producer exports.
        x = Producer(np.ones(64, dtype=np.float32))
        y = Producer(np.zeros(64, dtype=np.float32))
        with self.assertRaisesRegex(TypeError, "at most one argument.*torch.from_dlpack"):
            ft.saxpy(1.0, x, y)
        self.assertEqual((x.exports, y.exports), (0, 0), "__dlpack__ was called before the refusal")
        self.assertEqual(ft.pending(), 0)
        # One producer beside a NumPy array runs.
        out = np.zeros(64, dtype=np.float32)
        ft.saxpy(2.0, np.ones(64, dtype=np.float32), Producer(out))
        self.assertEqual(out.tolist(), [2.0] * 64)

    def test_g20r_3_a_numpy_subclass_counts_as_a_foreign_producer(self):
        # Only exactly numpy.ndarray is exported without running Python code: a subclass may
        # carry a __dlpack__ of its own.
        class Sub(np.ndarray):
            pass

        x = np.ones(64, dtype=np.float32).view(Sub)
        y = Producer(np.zeros(64, dtype=np.float32))
        with self.assertRaisesRegex(TypeError, "at most one argument"):
            ft.saxpy(1.0, x, y)
        self.assertEqual(y.exports, 0)

    def test_a_cuda_capsule_from_a_producer_that_says_host_is_refused(self):
        # The other way round: `__dlpack_device__` says host, the capsule says CUDA device 0.
        # Taken at its word, the CPU executor would read and write the capsule's address as
        # host memory (a device address: a crash or worse). The capsule is made here with
        # ctypes (its address is host memory, so the test is harmless if the check is missing,
        # and then fails on the missing refusal).
        capsule, keep = fake_capsule(device_type=2, n=64)
        producer = Producer(None, device=(1, 0))
        producer.__dlpack__ = lambda stream=None: capsule
        with self.assertRaisesRegex(ValueError, "inconsistent"):
            ft.saxpy(1.0, np.ones(64, dtype=np.float32), producer)
        self.assertEqual(ft.pending(), 0)
        del keep

    def test_devices_are_compared_before_any_array_is_exported(self):
        liar = Producer(np.zeros(64, dtype=np.float32), device=(2, 0))
        y = Producer(np.zeros(64, dtype=np.float32))
        with self.assertRaisesRegex(ValueError, "different devices"):
            ft.saxpy(1.0, liar, y)
        self.assertEqual((liar.exports, y.exports), (0, 0), "__dlpack__ was called before the devices were compared")

    def test_interpreter_exit_runs_the_release_hook_quietly(self):
        # The atexit hook waits for held work and releases it; with nothing held it prints
        # nothing and the interpreter exits normally.
        code = "import numpy as np; from ferrocuda_torch import dlpack as ft; x = np.ones(8, dtype=np.float32); ft.saxpy(1.0, x, np.zeros(8, dtype=np.float32)); print(ft.pending())"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.strip(), "0")
        self.assertNotIn("still held", done.stderr)


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


class Gpu(unittest.TestCase):
    def setUp(self):
        _gpu_or_skip(self)
        import torch

        self.torch = torch
        n = 1 << 20
        self.n = n
        self.x = torch.ones(n, device="cuda")
        # The first call of the process loads the module, which waits for the device.
        ft.saxpy(1.0, self.x, torch.zeros(n, device="cuda"))
        torch.cuda.synchronize()
        self.assertEqual(ft.release_pending(), 0)

    def held_call(self):
        """A saxpy into a producer's temporary, queued behind ~1 s of sleep on torch's current
        stream. Returns `held()`, true while torch's allocator still counts the temporary as
        allocated (torch's capsule holds the C++ tensor, not the Python object, so a weak
        reference cannot tell), and the producer's stream."""
        torch = self.torch
        side = torch.cuda.Stream()
        base = torch.cuda.memory_allocated()
        with torch.cuda.stream(side):
            y = torch.zeros(self.n, device="cuda")
        side.synchronize()
        size = y.numel() * y.element_size()
        producer = Producer(y)
        del y
        torch.cuda._sleep(int(2e9))
        ft.saxpy(2.0, self.x, producer)
        # The call did not wait for the kernel (the common path does not block).
        self.assertFalse(torch.cuda.current_stream().query(), "the call returned after the GPU work: it blocked")
        del producer
        gc.collect()
        return (lambda: torch.cuda.memory_allocated() >= base + size), side

    def test_g18r_2_a_gpu_calls_arrays_are_held_until_the_kernel_completed(self):
        held, _ = self.held_call()
        self.assertTrue(held(), "G18R-2: the producer's array was released while the kernel was queued")
        self.assertEqual(ft.pending(), 2, "x and y of the queued call are held and counted")
        self.assertEqual(ft.release_pending(), 2, "released without waiting while the kernel is queued")
        self.assertTrue(held())
        self.torch.cuda.synchronize()
        self.assertEqual(ft.release_pending(), 0)
        gc.collect()
        self.assertFalse(held(), "the array was kept after its kernel completed (a leak)")

    def test_g18r_2_the_next_call_releases_what_completed(self):
        held, _ = self.held_call()
        self.torch.cuda.synchronize()
        self.assertTrue(held(), "released before any later call or release_pending")
        out = self.torch.empty(4, 8, device="cuda")
        ft.softmax(self.torch.ones(4, 8, device="cuda"), out)
        gc.collect()
        self.assertFalse(held(), "a later call did not release the completed call's arrays")
        self.assertEqual(ft.pending(), 2, "only the new call's x and out are held")
        self.torch.cuda.synchronize()
        self.assertEqual(ft.release_pending(), 0)

    def test_g18r_2_release_pending_wait_waits_for_the_kernel_then_releases(self):
        held, side = self.held_call()
        self.assertTrue(held())
        self.assertEqual(ft.release_pending(wait=True), 0)
        gc.collect()
        self.assertFalse(held())
        # The wait covered the kernel: the memory the producer gets back next is not written.
        with self.torch.cuda.stream(side):
            z = self.torch.full((self.n,), 7.0, device="cuda")
        side.synchronize()
        self.torch.cuda.synchronize()
        self.assertEqual(z[:4].tolist(), [7.0] * 4)

    def test_a_capsule_on_another_device_than_dlpack_device_said_is_refused(self):
        # A producer that says CUDA and exports host memory: taken at its word, a host address
        # would be borrowed as device memory. Refused by comparing with the capsule's own
        # device, with nothing held. (Beside a torch tensor: two producers are refused anyway.)
        x = self.torch.ones(64, device="cuda")
        y = Producer(np.zeros(64, dtype=np.float32) if np is not None else self.torch.zeros(64), device=(2, 0))
        self.assertEqual(ft.release_pending(wait=True), 0)
        with self.assertRaisesRegex(ValueError, "inconsistent"):
            ft.saxpy(1.0, x, y)
        self.assertEqual(y.exports, 1)
        self.assertEqual(ft.pending(), 0)

    def test_g18r_2_a_capture_is_refused_before_any_producer_exports(self):
        torch = self.torch
        x = torch.randn(4, 16, device="cuda")
        out = torch.empty_like(x)
        producer = Producer(torch.empty_like(x))
        self.assertEqual(ft.release_pending(wait=True), 0)
        g = torch.cuda.CUDAGraph()
        with self.assertRaisesRegex(RuntimeError, "being captured"):
            with torch.cuda.graph(g):
                ft.softmax(x, producer)
        self.assertEqual(producer.exports, 0, "__dlpack__ ran inside the capture")
        self.assertEqual(ft.pending(), 0)
        # Outside the capture the same call runs.
        ft.softmax(x, out)
        torch.cuda.synchronize()
        torch.testing.assert_close(out, torch.softmax(x, dim=-1), rtol=1e-5, atol=1e-6)


if __name__ == "__main__":
    unittest.main()
