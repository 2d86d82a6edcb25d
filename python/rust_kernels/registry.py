"""The registry of kernel families. A family is one operation (e.g. BatchNorm2d's eval backward) and everything the
layers above its kernels need: the ops it exports, its launch plans, test inputs, the float64 reference, the
tolerance model, and for the benchmark the bytes it moves and the baselines a user would pick instead. `check`, the
tests, the benchmark and the CLI iterate the registry; nothing generic names a family.

The package's families live in rust_kernels.families (one folder each, beside their specs in codegen/<folder>); a
user registers their own with `rust_kernels.register(family)`.
"""

from __future__ import annotations

import importlib
import pkgutil
from abc import ABC, abstractmethod
from collections.abc import Callable
from functools import cache
from typing import Any, Protocol

import numpy as np

from rust_kernels.errors import ArgumentError
from rust_kernels.kernels import Kernel

Shape = tuple[int, ...]


class Plan(Protocol):
    """How one call runs: a kernel instance and its launch geometry; `label` names it in reports."""

    kernel: Kernel

    @property
    def label(self) -> str: ...


class Family(ABC):
    """One operation and what check, tests and bench need of it."""

    name: str  # the operation, e.g. "batch_norm_2d_nchw_backward"
    kernels: tuple[str, ...]  # the spec names that implement it (the first is the seed kernel)
    dtypes: tuple[str, ...] = ("f32", "f64", "bf16", "f16")
    outputs: tuple[str, ...]  # names of the outputs, in the order `run` and `reference` return them
    suites: dict[str, list[Shape]]  # cross-check shapes per backend ("cuda", "host")
    bench_shapes: list[Shape] = []  # noqa: RUF012 (class-level default, replaced per family)
    ops: dict[str, Callable[..., Any]] = {}  # noqa: RUF012 — public ops (rust_kernels.ops.<name>)
    # PyTorch operator schemas of some of those ops, "(arguments) -> returns" in torch.library's syntax, arguments
    # in the op's order: rust_kernels.torch registers each as torch.ops.rust_kernels.<name>.
    torch_schemas: dict[str, str] = {}  # noqa: RUF012

    @abstractmethod
    def inputs(self, shape: Shape, dtype: str, seed: int = 0) -> dict[str, np.ndarray]:
        """Seeded random inputs in the storage dtypes of dtype key `dtype` (so the reference sees exactly what the
        kernel reads). A dtype key is a dtype name, or "activations-parameters" (bf16-f32) for mixed precision."""

    def inputs_key(self, plan: Plan) -> str:
        """The dtype key of the inputs `plan` runs on (default: its kernel's dtype)."""
        return plan.kernel.dtype

    @abstractmethod
    def reference(self, inputs: dict[str, np.ndarray], plan: Plan) -> tuple[np.ndarray, ...]:
        """The outputs in float64, computed independently of the kernels."""

    @abstractmethod
    def plans(self, backend: str, shape: Shape, dtype: str) -> list[Plan]:
        """Every plan worth cross-checking on this shape (each kernel variant and mode) on `backend` ("cuda" or
        "host"); "every": the GPU plans over every CTA size of every kernel instance (the sanitizer runs them)."""

    @abstractmethod
    def run(self, plan: Plan | None, arrays: dict[str, Any], backend: str) -> tuple[Any, ...]:
        """Runs the op with `plan` (None: the op's own choice) on `arrays` (device arrays, or NumPy for the host)."""

    def choose(self, data: dict[str, Any], backend: str) -> Plan:
        """The plan the op picks for arrays `data` when none is forced (the one `run(None, data, ...)` launches)."""
        raise NotImplementedError(f"{type(self).__name__} does not say which plan its op chooses")

    @abstractmethod
    def tolerances(
        self, plan: Plan, shape: Shape, inputs: dict[str, np.ndarray], ref: tuple[np.ndarray, ...]
    ) -> list[np.ndarray]:
        """Per output, elementwise error bounds derived from the arithmetic (never tuned)."""

    def moved_bytes(self, shape: Shape, dtype: str) -> int:
        """The least bytes a call must move (the memory bound's numerator)."""
        raise NotImplementedError

    def bench_calls(self, tensors: dict[str, Any]) -> dict[str, Callable[[], Any]]:
        """Columns to time on PyTorch tensors: ours (and its modes), the baselines a user would pick instead, and
        `bound`, a call that moves the same bytes. Needs PyTorch."""
        raise NotImplementedError


_FAMILIES: dict[str, Family] = {}


def register(family: Family) -> Family:
    """Adds a family (the package's, or a user's) to the registry."""
    if not isinstance(family, Family):
        raise ArgumentError(f"family: expected a rust_kernels.registry.Family, got {type(family).__name__}")
    other = _FAMILIES.get(family.name)
    if other is not None and other is not family:
        raise ArgumentError(f"family: {family.name!r} is already registered ({type(other).__name__})")
    _FAMILIES[family.name] = family
    return family


@cache
def _load_package_families() -> None:
    from rust_kernels import families

    for module in pkgutil.iter_modules(families.__path__, f"{families.__name__}."):
        importlib.import_module(module.name)


def families() -> list[Family]:
    """Every registered family, the package's first."""
    _load_package_families()
    return list(_FAMILIES.values())


def family(name: str) -> Family:
    for f in families():
        if f.name == name:
            return f
    raise ArgumentError(f"family: no family {name!r} (registered: {[f.name for f in families()]})")


def op(name: str) -> Callable[..., Any]:
    """The public op `name` of whichever family exports it."""
    for f in families():
        if name in f.ops:
            return f.ops[name]
    raise AttributeError(f"rust_kernels.ops has no op {name!r}")
