"""Registers an op declared in Rust (ferrocuda_torch::op::Op) with torch.library.

Embedded in every extension module built with ferrocuda_torch::op::register (and in
ferrocuda_torch._C, whose library ops take the same path) and run once per extension, at its
first registration, in a module of that extension's own that is not in sys.modules (op.rs,
`registrar`; audit 2026-11-29d, G23L-1): two extensions built on ferrocuda-torch in one process
never share or replace each other's state here (the Library objects below, whose release would
unregister their ops).
`spec` holds the qualified name, the schema, the inputs (name, allowed dtypes, like, written in
place), the returned outputs (name, like, shape rule, dtype or None), the scalars' names, the
backward (op, arguments, gradients, shared gradients) or None, and `launch`: the Rust function
that takes (*inputs, *scalars), checks them, allocates the outputs with torch, queues the kernel
on torch's current stream and returns the outputs. `launch` is the op's CUDA implementation
itself: no Python runs between torch's dispatcher and Rust.

`hooks` (optional, a dict): `prepare`, a function of the op's arguments returning the launch's
(conversions a kernel needs, made with torch ops); `autograd`, a pair (backward, setup_context)
that replaces the one built from the spec's backward (a backward made of torch ops).
"""

import torch

_DTYPES = {
    "torch.float32": torch.float32,
    "torch.bfloat16": torch.bfloat16,
    "torch.float16": torch.float16,
    "torch.int32": torch.int32,
    "torch.int64": torch.int64,
}

# Keeps each torch.library.Library of this extension alive for the life of the process (an op is
# unregistered when its Library is freed, and torch's operator handles taken before then, such
# as torch.ops.ns.op.default, would point at a freed entry: G23L-1).
_LIBRARIES = {}


def _library(namespace):
    if namespace not in _LIBRARIES:
        _LIBRARIES[namespace] = torch.library.Library(namespace, "FRAGMENT")
    return _LIBRARIES[namespace]


def _shape(rule, shape):
    if rule == "same":
        return shape
    if rule == "rows":
        return shape[:-1]
    if rule == "last":
        return shape[-1:]
    if rule == "half_last":
        return (*shape[:-1], shape[-1] // 2)
    raise ValueError(f"unknown shape rule {rule!r}")


def register(module, spec, hooks=None):
    hooks = hooks or {}
    qualname = spec["qualname"]
    namespace, name = qualname.split("::")
    inputs = spec["inputs"]
    outputs = spec["outputs"]
    launch = spec["launch"]
    index = {entry[0]: i for i, entry in enumerate(inputs)}
    lib = _library(namespace)

    def check(args):
        for i, (arg_name, dtypes, like, _) in enumerate(inputs):
            t = args[i]
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"{qualname}: `{arg_name}` must be a torch.Tensor, not {type(t).__name__}")
            if like is None:
                if t.dtype not in [_DTYPES[d] for d in dtypes]:
                    raise TypeError(f"{qualname}: `{arg_name}` has dtype {t.dtype}; this op takes {', '.join(dtypes)}")
            else:
                ref = args[index[like]]
                if t.shape != ref.shape or t.dtype != ref.dtype:
                    raise ValueError(
                        f"{qualname}: `{arg_name}` ({tuple(t.shape)}, {t.dtype}) must have the shape and dtype of "
                        f"`{like}` ({tuple(ref.shape)}, {ref.dtype})"
                    )

    prepare = hooks.get("prepare")
    if prepare is None:
        impl = launch
    else:

        def impl(*args):
            return launch(*prepare(*args))

    def fake_impl(*args):
        if prepare is not None:
            args = prepare(*args)
        check(args)
        outs = []
        for _, like, rule, dtype in outputs:
            ref = args[index[like]]
            outs.append(ref.new_empty(_shape(rule, ref.shape), dtype=_DTYPES[dtype] if dtype else ref.dtype))
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else tuple(outs)

    mutated = [entry[0] for entry in inputs if entry[3]]
    if mutated:
        # An op that writes its inputs goes through torch.library.custom_op, which also bumps
        # the written tensors' version counters (autograd's check of in-place writes).
        schema = spec["schema"]

        def mutating_impl(*args):
            return impl(*args)

        custom = torch.library.custom_op(qualname, mutating_impl, mutates_args=mutated, schema=schema[schema.index("(") :])
        custom.register_fake(fake_impl)
    else:
        lib.define(spec["schema"], tags=(torch.Tag.pt2_compliant_tag,))
        lib.impl(name, impl, "CUDA")
        # CPU tensors reach the same checks, which refuse them with a message that says what to
        # do (rather than torch's "could not run ... with arguments from the 'CPU' backend").
        lib.impl(name, impl, "CPU")
        torch.library.register_fake(qualname, fake_impl, lib=lib)

    autograd = hooks.get("autograd") or (_autograd(namespace, spec) if spec["backward"] else None)
    if autograd is not None:
        backward, setup_context = autograd
        torch.library.register_autograd(qualname, backward, setup_context=setup_context, lib=lib)
    op = getattr(getattr(torch.ops, namespace), name)
    setattr(module, name, op)
    # The Rust launchers by op name (tests call them directly, past torch's dispatcher).
    if not hasattr(module, "_launchers"):
        module._launchers = {}
    module._launchers[name] = launch


def _autograd(namespace, spec):
    """The (backward, setup_context) of the spec's backward: the backward op called with the
    gradients of the outputs and the saved inputs, outputs and scalars; its results are the
    gradients of the inputs named (in the inputs' dtypes)."""
    backward_name, args, grads, shared = spec["backward"]
    input_names = [entry[0] for entry in spec["inputs"]]
    output_names = [entry[0] for entry in spec["outputs"]]
    scalar_names = spec["scalars"]
    n_args = len(input_names) + len(scalar_names)
    # Where each saved tensor comes from: ("in", i) or ("out", i); scalars by argument index.
    saved = []
    plan = []  # per backward argument: ("grad", i) | ("tensor", k) | ("scalar", i) | ("not", i)
    for kind, arg in args:
        if kind == "grad":
            plan.append(("grad", output_names.index(arg)))
        elif kind == "not":
            plan.append(("not", len(input_names) + scalar_names.index(arg)))
        elif arg in scalar_names:
            plan.append(("scalar", len(input_names) + scalar_names.index(arg)))
        else:
            source = ("in", input_names.index(arg)) if arg in input_names else ("out", output_names.index(arg))
            if source not in saved:
                saved.append(source)
            plan.append(("tensor", saved.index(source)))
    grad_index = [input_names.index(g) for g in grads]
    shared_index = [(input_names.index(a), input_names.index(b)) for a, b in shared]
    scalar_index = sorted({i for kind, i in plan if kind in ("scalar", "not")})
    single_output = len(output_names) == 1

    def setup_context(ctx, inputs, output):
        outs = (output,) if single_output else output
        ctx.save_for_backward(*[inputs[i] if src == "in" else outs[i] for src, i in saved])
        ctx.scalars = {i: inputs[i] for i in scalar_index}
        ctx.grad_dtypes = [inputs[i].dtype for i in grad_index]

    def backward(ctx, *output_grads):
        tensors = ctx.saved_tensors
        call = []
        for kind, i in plan:
            if kind == "grad":
                call.append(output_grads[i].contiguous())
            elif kind == "tensor":
                call.append(tensors[i])
            elif kind == "scalar":
                call.append(ctx.scalars[i])
            else:
                call.append(not ctx.scalars[i])
        results = getattr(getattr(torch.ops, namespace), backward_name)(*call)
        if isinstance(results, torch.Tensor):
            results = (results,)
        out = [None] * n_args
        for g, i, dtype in zip(results, grad_index, ctx.grad_dtypes):
            out[i] = g if g.dtype == dtype else g.to(dtype)
        for a, b in shared_index:
            out[a] = out[b]
        return tuple(out)

    return backward, setup_context
