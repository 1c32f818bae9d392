"""ferrocuda_torch on NumPy arrays: the kernels run on ferrocuda's CPU executor, in place.
Runs in CI (scripts/check-python.sh), no GPU needed."""

import threading

import numpy as np
import pytest

from ferrocuda_torch import dlpack as ft


def rng(seed):
    return np.random.default_rng(seed)


def test_saxpy_writes_y_in_place():
    x = rng(1).standard_normal(1000, dtype=np.float32)
    y = rng(2).standard_normal(1000, dtype=np.float32)
    expected = np.float32(1.5) * x + y
    before = y.ctypes.data
    ft.saxpy(1.5, x, y)
    assert y.ctypes.data == before
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shape", [(1, 1), (3, 31), (4, 5, 64), (17, 1000)])
def test_rms_norm_matches_numpy(shape):
    x = rng(3).standard_normal(shape, dtype=np.float32)
    w = rng(4).standard_normal(shape[-1], dtype=np.float32)
    out = np.full_like(x, np.nan)
    ft.rms_norm(x, w, out, eps=1e-6)
    expected = x / np.sqrt(np.mean(x.astype(np.float64) ** 2, axis=-1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(1, 1), (3, 31), (2, 3, 128), (9, 1000)])
def test_softmax_matches_numpy(shape):
    x = rng(5).standard_normal(shape, dtype=np.float32) * 4
    out = np.full_like(x, np.nan)
    ft.softmax(x, out)
    e = np.exp(x.astype(np.float64) - x.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(axis=-1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_a_strided_view_is_refused_with_what_to_do():
    x = np.zeros((8, 8), dtype=np.float32)[:, ::2]
    with pytest.raises(ValueError, match="not C-contiguous"):
        ft.softmax(x, np.zeros((8, 4), dtype=np.float32))


def test_another_dtype_is_refused_with_what_to_do():
    with pytest.raises(TypeError, match="only float32"):
        ft.softmax(np.zeros((2, 4)), np.zeros((2, 4)))


def test_an_output_overlapping_an_input_is_refused():
    x = np.ones((4, 16), dtype=np.float32)
    with pytest.raises(ValueError, match="overlaps an input"):
        ft.softmax(x, x)
    with pytest.raises(ValueError, match="overlaps an input"):
        ft.saxpy(2.0, x.reshape(-1)[:32], x.reshape(-1)[16:48])


def test_mismatched_shapes_and_non_arrays_are_refused():
    x = np.ones((4, 16), dtype=np.float32)
    with pytest.raises(ValueError, match="last dimension"):
        ft.rms_norm(x, np.ones(8, dtype=np.float32), np.empty_like(x))
    with pytest.raises(ValueError, match="out has shape"):
        ft.softmax(x, np.empty((16, 4), dtype=np.float32))
    with pytest.raises(ValueError, match="x has 64 elements but y has 3"):
        ft.saxpy(1.0, x, np.ones(3, dtype=np.float32))
    with pytest.raises(TypeError, match="not an array"):
        ft.softmax([1.0, 2.0], x)


def test_numpy_calls_record_no_gpu_launch():
    # Compared with what was recorded before, not with None: in one pytest process with the
    # GPU tests (scripts/gpu-run/torch-ops.sh runs this file after them), a GPU launch was
    # already recorded and must stay the last one.
    before = ft.last_launch()
    x = rng(5).standard_normal((4, 16), dtype=np.float32)
    ft.softmax(x, np.empty_like(x))
    ft.saxpy(2.0, x.reshape(-1), np.zeros(64, dtype=np.float32))
    assert ft.last_launch() == before


def test_audit_2026_11_28g_cpu_path_reads_an_array_another_thread_writes():
    """The GIL does not keep a host array unchanged: NumPy's copy loops (like its ufuncs) release
    it while they write. The CPU path therefore runs the kernel on copies read with atomic loads
    and writes the output back with atomic stores (dlpack.rs, `Imported::host_values`), never
    holding a slice over memory another thread writes (audit 2026-11-28g's note on the old
    SAFETY argument). Here a thread flips x between all 0 and all 1 while saxpy reads it: each
    element of y must come out as a * 0 + 2 or a * 1 + 2, never anything else."""
    n = 4096
    x = np.zeros(n, dtype=np.float32)
    ones, zeros = np.ones(n, dtype=np.float32), np.zeros(n, dtype=np.float32)
    stop = threading.Event()

    def writer():
        while not stop.is_set():
            np.copyto(x, ones)
            np.copyto(x, zeros)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for _ in range(20):
            y = np.full(n, 2.0, dtype=np.float32)
            ft.saxpy(3.0, x, y)
            assert np.isin(y, [2.0, 5.0]).all(), np.unique(y)
    finally:
        stop.set()
        thread.join()
