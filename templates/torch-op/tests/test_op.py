"""The op of this template: registered with torch.library when imported; its checks and its
fake implementation run anywhere (CPU torch too); its kernel on a CUDA device (skipped with
the reason printed without one, a failure under REQUIRE_GPU=1)."""

import os

import pytest
import torch

import my_torch_op

REQUIRE = os.environ.get("REQUIRE_GPU") == "1"
gpu = pytest.mark.skipif(not torch.cuda.is_available() and not REQUIRE, reason="no CUDA device: the kernel runs on CUDA tensors")


def test_the_op_is_registered_with_its_schema():
    op = torch.ops.my_ops.scale_add
    assert str(op.default._schema) == "my_ops::scale_add(Tensor x, Tensor y, float alpha) -> Tensor"
    assert my_torch_op.scale_add is op


def test_the_fake_implementation_gives_the_output_shape_without_a_gpu():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(4, 100)
        out = torch.ops.my_ops.scale_add(x, torch.empty(4, 100), 2.0)
        assert out.shape == (4, 100) and out.dtype == torch.float32


def test_checks_name_the_argument():
    x = torch.ones(8)
    with pytest.raises(TypeError, match="`x` has dtype torch.int64"):
        torch.ops.my_ops.scale_add(torch.ones(8, dtype=torch.int64), x, 1.0)
    with pytest.raises(ValueError, match="`y` .* must have the shape and dtype of `x`"):
        torch.ops.my_ops.scale_add(x, torch.ones(9), 1.0)
    with pytest.raises(ValueError, match="`x` is on the CPU"):
        torch.ops.my_ops.scale_add(x, x, 1.0)


@gpu
def test_the_kernel_matches_torch_on_the_gpu():
    x = torch.randn(1000, 33, device="cuda")
    y = torch.randn(1000, 33, device="cuda")
    torch.testing.assert_close(my_torch_op.scale_add(x, y, 2.5), 2.5 * x + y)
    with pytest.raises(ValueError, match="not contiguous"):
        my_torch_op.scale_add(x.t(), y.t(), 1.0)


@gpu
def test_opcheck_compile_and_graph_capture():
    x = torch.randn(4096, device="cuda")
    y = torch.randn(4096, device="cuda")
    torch.library.opcheck(torch.ops.my_ops.scale_add.default, (x, y, 3.0))

    def f(x, y):
        return torch.ops.my_ops.scale_add(x, y, 2.0).relu()

    torch.testing.assert_close(torch.compile(f, fullgraph=True)(x, y), (2.0 * x + y).relu())
    f(x, y)  # warm-up: loads the kernel before the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = f(x, y)
    x.copy_(torch.randn_like(x))
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, (2.0 * x + y).relu())
