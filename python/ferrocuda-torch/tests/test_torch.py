"""ferrocuda_torch on PyTorch CUDA tensors: DLPack in, the kernel on torch's current stream,
nothing copied; results compared with torch's own ops. Skipped without torch or a GPU, failed
instead under REQUIRE_GPU=1."""

import os

import pytest

torch = pytest.importorskip("torch") if os.environ.get("REQUIRE_GPU") != "1" else __import__("torch")
from ferrocuda_torch import dlpack as ft

if not torch.cuda.is_available():
    if os.environ.get("REQUIRE_GPU") == "1":
        raise RuntimeError("REQUIRE_GPU=1 but torch sees no CUDA device")
    pytest.skip("no CUDA device", allow_module_level=True)

DEV = "cuda:0"


def launched(*tensors):
    """The last launch's stream and addresses, checked against torch's: the kernel ran on
    torch's current stream, on the tensors' own memory."""
    stream, addresses = ft.last_launch()
    assert stream == torch.cuda.current_stream().cuda_stream
    assert addresses == [t.data_ptr() for t in tensors], "a copy was made"


def test_saxpy_in_place_on_torch_memory():
    x = torch.randn(1 << 20, device=DEV)
    y = torch.randn(1 << 20, device=DEV)
    expected = 2.0 * x + y
    ptr = y.data_ptr()
    ft.saxpy(2.0, x, y)
    launched(x, y)
    assert y.data_ptr() == ptr
    torch.testing.assert_close(y, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shape", [(1, 1), (3, 31), (4, 5, 64), (4096, 4096), (8, 8192)])
def test_rms_norm_matches_torch(shape):
    x = torch.randn(shape, device=DEV)
    w = torch.randn(shape[-1], device=DEV)
    out = torch.empty_like(x)
    ft.rms_norm(x, w, out, eps=1e-6)
    launched(x, w, out)
    expected = torch.nn.functional.rms_norm(x, (shape[-1],), w, 1e-6)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(1, 1), (3, 31), (2, 3, 128), (4096, 4096), (8, 8192)])
def test_softmax_matches_torch(shape):
    x = torch.randn(shape, device=DEV) * 4
    out = torch.empty_like(x)
    ft.softmax(x, out)
    launched(x, out)
    torch.testing.assert_close(out, torch.softmax(x, dim=-1), rtol=1e-5, atol=1e-6)


def test_runs_on_a_side_stream_in_order_with_torchs_work_there():
    """On a non-default torch stream: torch's op before, ours, torch's op after, no sync in
    between; the ordering comes from the stream alone."""
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        x = torch.randn(4096, 4096, device=DEV)
        out = torch.empty_like(x)
        x.mul_(3.0)  # torch, before
        ft.softmax(x, out)
        launched(x, out)
        assert ft.last_launch()[0] == s.cuda_stream != 0
        expected = torch.softmax(x, dim=-1)
        out.mul_(2.0)  # torch, after
    s.synchronize()
    torch.testing.assert_close(out, 2.0 * expected, rtol=1e-5, atol=1e-6)


def test_cpu_tensors_run_on_the_cpu_executor():
    x = torch.randn(16, 100)
    out = torch.empty_like(x)
    ft.softmax(x, out)
    torch.testing.assert_close(out, torch.softmax(x, dim=-1), rtol=1e-5, atol=1e-6)


def test_mixed_devices_and_capture_are_refused():
    x = torch.randn(4, 16, device=DEV)
    with pytest.raises(ValueError, match="different devices"):
        ft.softmax(x, torch.empty(4, 16))
    g = torch.cuda.CUDAGraph()
    out = torch.empty_like(x)
    with pytest.raises(RuntimeError, match="being captured"):
        with torch.cuda.graph(g):
            ft.softmax(x, out)
