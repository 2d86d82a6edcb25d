"""The registry's ops as PyTorch operators (torch.library), generated from their declarations (rust_kernels.runtime):
every op declared with `torch=True` becomes `torch.ops.rust_kernels.<name>` with

- a schema from the declaration: its inputs (optional ones `Tensor?`, mutated ones marked), its scalars with their
  defaults, its outputs;
- a CUDA kernel, the op itself: it launches on torch's current stream of the tensors' device, allocates its outputs
  (and workspaces) with torch's caching allocator and never synchronises, so streams and CUDA-graph capture work as
  with torch's own ops;
- a CPU kernel, the same op in the host emulator (backend="host"): tensors to NumPy (bf16 by its bits), the op,
  NumPy back to tensors. Slow, but the real kernels: CI without a GPU runs everything, opcheck included;
- a fake kernel (torch.compile, export, the meta device): the op's own checks and allocation rule, no launch, so a
  traced call is refused exactly where a real one would be;
- autograd from the declared pairing (`Gradient`): the backward op's arguments found by name among the forward's
  inputs, outputs and scalars. A backward that records a graph (create_graph=True) runs the backward op's
  differentiable form in torch's ops where `differentiable.BACKWARDS` has one (BatchNorm2d's), so double backward
  works; a backward op called itself refuses double backward; forward-mode AD (a dual tensor's tangent) is refused
  with an error naming the op, never dropped.

Inputs are made dense first: contiguous (a copy for slices, the expanded gradient of a `sum()`), or in another memory
order where the op reads it (`Op.orders`: channels_last) and an input is in it; lazily negated or conjugated views
resolved.
Outputs are allocated as the declaration says (like their input: in its memory format).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import cache
from typing import Any

import torch
from torch.autograd import forward_ad

from rust_kernels import arrays, registry
from rust_kernels.errors import ArgumentError
from rust_kernels.runtime import Op
from rust_kernels.torch.differentiable import BACKWARDS

NAMESPACE = "rust_kernels"
_LIBRARY = torch.library.Library(NAMESPACE, "FRAGMENT")  # kept alive: the registrations live as long as it does


def _order(op: Op, args: tuple[Any, ...]) -> tuple[int, ...] | None:
    """The memory order (besides C's) the op reads with these scalars that a non-contiguous tensor argument is
    dense in (channels_last), or None."""
    loose = [a for a in args if isinstance(a, torch.Tensor) and not a.is_contiguous()]
    if not loose or op.orders is None:  # every call of a contiguous program stops here
        return None
    scalars = dict(zip((s.name for s in op.scalars), args[len(op.inputs) :], strict=True))
    for order in op.orders(scalars):
        for a in loose:
            if a.dim() == len(order) and arrays.contiguous_in(a, order):
                return order
    return None


def _dense(a: torch.Tensor, order: tuple[int, ...] | None) -> torch.Tensor:
    """`a` (a lazily negated or conjugated view resolved) C-contiguous, or dense in `order` where it has that rank."""
    if a.is_neg() or a.is_conj():
        a = a.resolve_neg().resolve_conj()
    if order is None or a.dim() != len(order):
        return a.contiguous()
    if arrays.contiguous_in(a, order):
        return a
    back = sorted(range(len(order)), key=order.__getitem__)
    return a.permute(*order).contiguous().permute(*back)


def _resolved(op: Op, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Plain dense tensors with the arguments' values: contiguous, or every one of that rank in the memory order the
    op reads where an argument is in it (no copies of a channels_last model's activations; a gradient in the other
    format is copied to it)."""
    order = _order(op, args)
    return tuple(_dense(a, order) if isinstance(a, torch.Tensor) else a for a in args)


def _check_devices(op: Op, args: tuple[Any, ...], device: str) -> None:
    """Every tensor argument on `device` (the dispatcher picks a kernel by the first tensors' device)."""
    for spec, a in zip(op.inputs, args, strict=False):
        if isinstance(a, torch.Tensor) and a.device.type != device:
            raise ArgumentError(f"{spec.name}: expected a tensor on {device} like the others, got one on {a.device}")


@cache
def _parameters(op: Op) -> tuple[tuple[str, ...], dict[str, Any]]:
    """The op's argument names in the declaration's order, and the defaults of those that have one."""
    names = (*(i.name for i in op.inputs), *(s.name for s in op.scalars))
    return names, {i.name: None for i in op.inputs if i.optional} | {s.name: s.default for s in op.scalars}


@cache
def _filling(op: Op, given: int, keywords: tuple[str, ...]) -> tuple[tuple[bool, Any], ...] | None:
    """How a call with `given` positional arguments and these keyword arguments fills the op's others, in the
    declaration's order: (True, name) a keyword argument's value, (False, value) a default; None where such a call
    does not fit the signature."""
    names, defaults = _parameters(op)
    rest = names[given:]
    if given > len(names) or not set(keywords) <= set(rest) or any(n not in keywords and n not in defaults
                                                                   for n in rest):  # fmt: skip
        return None
    return tuple((True, n) if n in keywords else (False, defaults[n]) for n in rest)


def _bound(op: Op, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """Every argument of a call in the declaration's order (the dispatcher passes what the caller passed: compiled
    graphs pass scalars by name; inspect's binding took 0.25 ms a call there). A call that does not fit the
    signature gets inspect's TypeError."""
    if not kwargs and len(args) == len(_parameters(op)[0]):
        return args
    filling = _filling(op, len(args), tuple(kwargs))
    if filling is not None:
        return args + tuple(kwargs[v] if by_name else v for by_name, v in filling)
    bound = inspect.signature(op.function).bind(*args, **kwargs)  # raises, naming what does not fit
    bound.apply_defaults()
    return tuple(bound.arguments[n] for n in _parameters(op)[0])


def _no_tangents(op: Op, args: tuple[Any, ...]) -> None:
    """Forward-mode AD is not implemented by the operators: a dual tensor's tangent would be dropped silently."""
    if forward_ad._current_level >= 0:
        for spec, a in zip(op.inputs, args, strict=False):
            if isinstance(a, torch.Tensor) and forward_ad.unpack_dual(a).tangent is not None:
                raise NotImplementedError(f"rust_kernels::{op.name}: forward-mode AD is not implemented ({spec.name} "
                                          "has a tangent)")  # fmt: skip


def run_cuda(op: Op, *args: Any, **kwargs: Any) -> Any:
    """`op` on CUDA tensors, on torch's current stream (the op's default): its fast path where the call's signature
    was decided (dense plain tensors, as a compiled graph passes them), else resolved and contiguous."""
    args = _bound(op, args, kwargs)
    _no_tangents(op, args)
    out = op.fast(args[: len(op.inputs)], args[len(op.inputs) :])
    return op(*_resolved(op, args), backend="cuda") if out is None else out


def run_host(op: Op, *args: Any, **kwargs: Any) -> Any:
    """`op` on CPU tensors, in the host emulator."""
    args = _bound(op, args, kwargs)
    _no_tangents(op, args)
    _check_devices(op, args, "cpu")
    resolved = _resolved(op, tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in args))
    out = op(*(arrays.to_host(a) if isinstance(a, torch.Tensor) else a for a in resolved), backend="host")
    inputs = dict(zip((i.name for i in op.inputs), resolved, strict=False))
    tensors = tuple(_from_host(a, inputs[o.like] if o.shape is None else None)
                    for a, o in zip(out if isinstance(out, tuple) else (out,), op.outputs, strict=True))  # fmt: skip
    return tensors if isinstance(out, tuple) else tensors[0]


def _from_host(a: Any, like: torch.Tensor | None) -> torch.Tensor:
    """An emulator output as a tensor. NumPy keeps no strides for an empty array (torch's .numpy() gives zeros): an
    empty output shaped like its input `like` takes like's, its memory format."""
    t = arrays.to_torch(a)
    return torch.empty_like(like, dtype=t.dtype) if like is not None and t.numel() == 0 else t


def call(op: Op, *args: Any) -> Any:
    """A registry op on plain CPU or CUDA tensors (the first argument's device) as the operators' kernels run it,
    called directly: no dispatcher, no autograd (the caller's autograd.Function records it). The eager fast path of
    rust_kernels.torch's modules; compiled, traced and transformed programs use the operators."""
    return (run_cuda if args[0].is_cuda else run_host)(op, *args)


def _literal(value: Any) -> str:
    return "None" if value is None else repr(value)


def schema(op: Op) -> str:
    """The operator schema of a declaration: "(arguments) -> returns" in torch.library's syntax."""
    params = []
    aliases = iter("abcdefghijklmnopqrstuvwxyz")
    for spec in op.inputs:
        kind = f"Tensor({next(aliases)}!)" if spec.mutated else "Tensor"
        params.append(f"{kind}? {spec.name}=None" if spec.optional else f"{kind} {spec.name}")
    params += [f"{s.torch_type} {s.name}={_literal(s.default)}" for s in op.scalars]
    returns = "Tensor" if len(op.outputs) == 1 else f"({', '.join('Tensor' for _ in op.outputs)})"
    return f"({', '.join(params)}) -> {returns}"


def _fake(op: Op) -> Callable[..., Any]:
    inputs = len(op.inputs)

    def fake(*args: Any, **kwargs: Any) -> Any:
        args = _resolved(op, _bound(op, args, kwargs))  # as the real kernels see them
        arrays_, scalars = args[:inputs], args[inputs:]
        backend = "cuda" if arrays_[0].device.type == "cuda" else "host"
        named, problem = op.problem(arrays_, scalars, backend, traced=True)
        out = op.allocate(named, problem)
        return out[0] if len(out) == 1 else out

    return fake


def _autograd(op: Op, backward: Op) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """setup_context and backward of `op` from its Gradient."""
    gradient = op.gradient
    assert gradient is not None
    forward_names = [i.name for i in op.inputs] + [s.name for s in op.scalars]
    outputs = [o.name for o in op.outputs]
    saved = [i.name for i in backward.inputs if i.name not in gradient.grads]
    given = {o.name: gradient.gives[o.name] for o in backward.outputs if o.name in gradient.gives}
    mutated = {i.name for i in op.inputs if i.mutated}
    grads_of = [forward_names.index(target) for target in given.values()]

    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        by_name = dict(zip(forward_names, inputs, strict=True))
        by_name |= dict(zip(outputs, output if isinstance(output, tuple) else (output,), strict=True))
        ctx.save_for_backward(*(None if name in mutated else by_name.get(name) for name in saved))
        # Inputs the forward mutates (running statistics) are kept by reference, not saved: saving would make the
        # next in-place update a version error; the backward sees their current values.
        ctx.mutated = {name: by_name[name] for name in saved if name in mutated}
        ctx.scalars = {s.name: by_name[s.name] for s in backward.scalars if s.name in by_name}

    def backward_fn(ctx: Any, *grads: Any) -> tuple[Any, ...]:
        by_output = dict(zip(outputs, grads, strict=True))
        upstream = {name: by_output[of] for name, of in gradient.grads.items()}
        result: list[Any] = [None] * len(forward_names)
        need = [ctx.needs_input_grad[k] for k in grads_of]
        if any(g is None for g in upstream.values()) or not any(need):
            return tuple(result)
        by_name = dict(zip(saved, ctx.saved_tensors, strict=True)) | ctx.mutated | upstream
        args = [by_name[i.name] for i in backward.inputs]
        args += [ctx.scalars.get(s.name, s.default) for s in backward.scalars]
        differentiable = BACKWARDS.get(backward.name) if torch.is_grad_enabled() else None
        # create_graph: torch's differentiable maths where there is one, so that double backward works
        out = (differentiable or getattr(torch.ops.rust_kernels, backward.name))(*args)
        out = out if isinstance(out, tuple) else (out,)
        for name, value in zip((o.name for o in backward.outputs), out, strict=True):
            if name in given:
                k = forward_names.index(given[name])
                result[k] = value if ctx.needs_input_grad[k] else None
        return tuple(result)

    return setup_context, backward_fn


# Below autograd, the kernel a plain CPU or CUDA call reaches (ADInplaceOrView falls through for these ops).
_KERNEL_KEYS = torch._C._after_autograd_keyset.remove(torch._C.DispatchKey.ADInplaceOrView)
_KERNEL_KEY: dict[int, Any] = {}  # by a keyset's bits: the first key below autograd that has a kernel


def _kernel_key(keyset: Any) -> Any:
    """The key of the kernel a call with this dispatch keyset reaches below autograd (computing it costs 1.8 us)."""
    raw = keyset.raw_repr()
    key = _KERNEL_KEY.get(raw)
    if key is None:
        key = _KERNEL_KEY[raw] = (keyset & _KERNEL_KEYS).highestPriorityTypeId()
    return key


def _autograd_kernel(op: Op, setup_context: Callable[..., Any], backward_fn: Callable[..., Any]
                     ) -> Callable[..., Any]:  # fmt: skip
    """The Autograd kernel (with the dispatch keyset) of an op with a gradient, or of a backward op (whose backward
    refuses): an autograd.Function whose forward redispatches below autograd to the op's own kernels where a graph
    is recorded. Where none is (a compiled graph's calls), it runs the CPU or CUDA kernel itself when nothing else
    sits between autograd and it (no mode, subclass, functionalization or lazy view, which redispatch): one crossing
    from the dispatcher into Python per call, not two. torch.library's register_autograd takes functional ops only
    and crosses twice."""
    overload = getattr(getattr(torch.ops, NAMESPACE), op.name).default
    kernels = {torch._C.DispatchKey.CUDA: run_cuda, torch._C.DispatchKey.CPU: run_host}

    def below(*args: Any) -> Any:
        with torch._C._AutoDispatchBelowAutograd():
            return overload(*args)

    class Recorded(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, *args: Any) -> Any:
            out = below(*args)
            setup_context(ctx, args, out)
            return out

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> tuple[Any, ...]:
            return backward_fn(ctx, *grads)

        @staticmethod
        def jvp(ctx: Any, *tangents: Any) -> Any:
            raise NotImplementedError(f"rust_kernels::{op.name}: forward-mode AD is not implemented")

    def kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
        args = _bound(op, args, kwargs)
        if torch.is_grad_enabled() and torch._C._any_requires_grad(*args):
            return Recorded.apply(*args)
        run = kernels.get(_kernel_key(keyset))
        if run is not None:
            return run(op, *args)
        return overload.redispatch(keyset & torch._C._after_autograd_keyset, *args)

    return kernel


def _nothing_saved(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    """The setup_context of an op whose backward refuses (a backward op's own, an op declared without a gradient),
    reading nothing."""


_DEFINED: dict[str, Op] = {}


def _refuse_backward(op: Op) -> None:
    """Registers `op`'s Autograd kernel as refusing its backward: a backward op's (double backward), or that of an op
    declared without a gradient. Autograd's fallback for an op without an Autograd kernel would instead leave its
    inputs without gradients, with a warning only."""
    double = any(o.gradient is not None and o.gradient.backward == op.name for o in registry.ops())
    why = "double backward is not implemented" if double else "it has no backward (its declaration names no gradient)"

    def refuse(ctx: Any, *_: Any) -> Any:
        raise NotImplementedError(f"rust_kernels::{op.name}: {why}")

    _LIBRARY.impl(op.name, _autograd_kernel(op, _nothing_saved, refuse), "Autograd", with_keyset=True)


def define(op: Op) -> None:
    """Defines `rust_kernels::<op.name>` with its CUDA, CPU and fake kernels, and the autograd of its declared
    pairing (a backward op defined before it, or with it by define_registry); differentiating an op without one
    raises. A user's op declared with torch=True and registered after rust_kernels.torch was imported becomes an
    operator through this."""
    if _DEFINED.get(op.name) is op:
        return
    qualified = f"{NAMESPACE}::{op.name}"
    # Any strides in (the kernels make every input dense, outputs follow the fake's): Inductor keeps the layout it
    # chose (channels_last convolutions in an NCHW model) instead of copying to and from the traced strides.
    _LIBRARY.define(op.name + schema(op), tags=(torch.Tag.flexible_layout,))
    _LIBRARY.impl(op.name, lambda *args, **kwargs: run_cuda(op, *args, **kwargs), "CUDA")
    _LIBRARY.impl(op.name, lambda *args, **kwargs: run_host(op, *args, **kwargs), "CPU")
    torch.library.register_fake(qualified, _fake(op), lib=_LIBRARY)
    _DEFINED[op.name] = op
    if op.gradient is None:
        _refuse_backward(op)
        return
    backward = _DEFINED.get(op.gradient.backward)
    if backward is None:
        raise ArgumentError(f"op {op.name}: its backward {op.gradient.backward!r} is not a defined torch op")
    setup_context, backward_fn = _autograd(op, backward)
    _LIBRARY.impl(op.name, _autograd_kernel(op, setup_context, backward_fn), "Autograd", with_keyset=True)


def define_registry() -> tuple[str, ...]:
    """Defines every op of the registry declared for torch (backward ops first, so the pairings find them);
    returns their names."""
    declared = [op for op in registry.ops() if op.torch]
    backwards = {op.gradient.backward for op in declared if op.gradient is not None}
    for op in sorted(declared, key=lambda op: op.name not in backwards):
        define(op)
    return tuple(op.name for op in declared)


OPS = define_registry()
