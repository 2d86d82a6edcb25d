"""The registry's ops as PyTorch operators (torch.library), generated from the families' `torch_schemas`: each
becomes `torch.ops.rust_kernels.<name>`, implemented

- for CUDA tensors by the op itself: it launches on torch's current stream of the tensors' device, allocates its
  outputs (and workspaces) with torch's caching allocator and never synchronises, so streams and CUDA-graph capture
  work as with torch's own ops;
- for CPU tensors by the same op in the host emulator (backend="host"): tensors to NumPy (bf16 by its bits), the
  op, NumPy back to tensors. Slow, but the real kernels: CI without a GPU runs everything, opcheck included.

Inputs must be NCHW; non-contiguous tensors (channels_last activations, slices, the expanded gradient of a `sum()`)
are first copied to contiguous ones by torch, an extra read and write of each such tensor; outputs are contiguous.

Fake (meta) kernels and autograd formulas are per op: rust_kernels.torch.batch_norm registers them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch

from rust_kernels import arrays, registry
from rust_kernels.errors import RustKernelsError

NAMESPACE = "rust_kernels"
_LIBRARY = torch.library.Library(NAMESPACE, "FRAGMENT")  # kept alive: the registrations live as long as it does


def _contiguous(a: Any) -> Any:
    return a.contiguous() if isinstance(a, torch.Tensor) else a


def _to_numpy(a: Any) -> Any:
    return arrays.to_host(a.detach().contiguous()) if isinstance(a, torch.Tensor) else a


def run_cuda(op: Callable[..., Any], *args: Any) -> Any:
    """`op` on CUDA tensors: made contiguous, on torch's current stream (the op's default)."""
    return op(*map(_contiguous, args), backend="cuda")


def run_host(op: Callable[..., Any], *args: Any) -> Any:
    """`op` on CPU tensors, in the host emulator."""
    out = op(*map(_to_numpy, args), backend="host")
    return tuple(map(arrays.to_torch, out)) if isinstance(out, tuple) else arrays.to_torch(out)


def call(op: Callable[..., Any], *args: Any) -> Any:
    """A registry op on plain CPU or CUDA tensors (the first argument's device) as the operators' kernels run it,
    called directly: no dispatcher, no autograd (the caller's autograd.Function records it). The eager fast path of
    rust_kernels.torch.batch_norm; compiled, traced and transformed programs use the operators."""
    return (run_cuda if args[0].is_cuda else run_host)(op, *args)


def _check_arguments(name: str, op: Callable[..., Any]) -> None:
    """The schema's arguments are passed to the op by position: they must be its first parameters, in order."""
    schema = getattr(getattr(torch.ops, NAMESPACE), name).default._schema
    names = [a.name for a in schema.arguments]
    params = list(inspect.signature(op).parameters)[: len(names)]
    if names != params:
        raise RustKernelsError(f"torch schema of {name}: arguments {names} are not the op's first parameters {params}")


def define(name: str, schema: str, op: Callable[..., Any]) -> None:
    """Defines `rust_kernels::<name>` with `schema` ("(arguments) -> returns") and its CUDA and CPU kernels."""
    _LIBRARY.define(name + schema)
    _check_arguments(name, op)

    def cuda(*args: Any) -> Any:
        return run_cuda(op, *args)

    def host(*args: Any) -> Any:
        return run_host(op, *args)

    _LIBRARY.impl(name, cuda, "CUDA")
    _LIBRARY.impl(name, host, "CPU")


def define_registry() -> tuple[str, ...]:
    """Defines every op of the registry that has a torch schema; returns their names."""
    names = []
    for family in registry.families():
        for name, schema in family.torch_schemas.items():
            define(name, schema, family.ops[name])
            names.append(name)
    return tuple(names)


OPS = define_registry()
