"""Registers an op declared in Rust (ferrocuda_torch::op::Op) with torch.library.

Embedded in every extension module built with ferrocuda_torch::op::register and run when that
module is imported. `spec` holds the qualified name, the schema, the inputs (name, allowed
dtypes, like), the outputs (name, like, dtype or None), the scalars' names and `launch`, the
Rust function that takes (*inputs, *outputs, *scalars) and queues the kernel on torch's
current stream.
"""

import torch

_DTYPES = {
    "torch.float32": torch.float32,
    "torch.bfloat16": torch.bfloat16,
    "torch.float16": torch.float16,
    "torch.int32": torch.int32,
    "torch.int64": torch.int64,
}

# Keeps each torch.library.Library alive (an op is unregistered when its Library is freed).
_LIBRARIES = {}


def _library(namespace):
    if namespace not in _LIBRARIES:
        _LIBRARIES[namespace] = torch.library.Library(namespace, "FRAGMENT")
    return _LIBRARIES[namespace]


def register(module, spec):
    qualname = spec["qualname"]
    namespace, name = qualname.split("::")
    inputs = spec["inputs"]
    outputs = spec["outputs"]
    n_in = len(inputs)
    launch = spec["launch"]
    index = {entry[0]: i for i, entry in enumerate(inputs)}
    lib = _library(namespace)
    lib.define(spec["schema"])

    def check(args):
        for i, (arg_name, dtypes, like) in enumerate(inputs):
            t = args[i]
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"{qualname}: `{arg_name}` must be a torch.Tensor, not {type(t).__name__}")
            if like is None:
                allowed = [_DTYPES[d] for d in dtypes]
                if t.dtype not in allowed:
                    raise TypeError(f"{qualname}: `{arg_name}` has dtype {t.dtype}; this op takes {', '.join(dtypes)}")
            else:
                ref = args[index[like]]
                if t.shape != ref.shape or t.dtype != ref.dtype:
                    raise ValueError(
                        f"{qualname}: `{arg_name}` ({tuple(t.shape)}, {t.dtype}) must have the shape and dtype of "
                        f"`{like}` ({tuple(ref.shape)}, {ref.dtype})"
                    )

    def new_outputs(args):
        outs = []
        for _, like, dtype in outputs:
            ref = args[index[like]]
            outs.append(torch.empty_like(ref, dtype=_DTYPES[dtype] if dtype else ref.dtype, memory_format=torch.contiguous_format))
        return outs

    def result(outs):
        return outs[0] if len(outs) == 1 else tuple(outs)

    def cuda_impl(*args):
        check(args)
        outs = new_outputs(args)
        launch(*args[:n_in], *outs, *args[n_in:])
        return result(outs)

    def fake_impl(*args):
        check(args)
        return result(new_outputs(args))

    lib.impl(name, cuda_impl, "CUDA")
    # CPU tensors reach the same checks, which refuse them with a message that says what to do
    # (rather than torch's "could not run ... with arguments from the 'CPU' backend").
    lib.impl(name, cuda_impl, "CPU")
    torch.library.register_fake(qualname, fake_impl, lib=lib)
    op = getattr(getattr(torch.ops, namespace), name)
    setattr(module, name, op)
