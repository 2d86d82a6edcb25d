"""The registry: the ops (runtime.Op declarations: rust_kernels.ops.<name>) and the families that verify them. A
family is one op and what check, fuzz, sanitize and the tests need of it: its shape, rank, layout and dtype spaces,
seeded inputs, the float64 reference and the tolerance model. Nothing generic names a family or a layout: they read
all of that from here. (What benchmarks an op, bytes moved and baselines, lives in rust_kernels.bench.baselines.)

The package's families live in rust_kernels.families (one folder each, beside their specs in codegen/<folder>); a
user registers their own ops and families with `rust_kernels.register(...)`.
"""

from __future__ import annotations

import importlib
import pkgutil
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from rust_kernels.errors import ArgumentError
from rust_kernels.runtime import Op, Plan

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Space:
    """Where a backend's random cases (fuzz, property tests) come from. A case holds at most 2**k elements, k drawn in
    [0, max_log2_elements]; its dimensions (one pool each, so the rank is len(dims)) are drawn last to first among
    the values that still fit; `scalars`: the op scalars drawn too, with their values; `offsets`: elements between
    an aligned address and the inputs (0: aligned)."""

    dims: tuple[tuple[int, ...], ...]
    max_log2_elements: int
    scalars: Mapping[str, tuple[Any, ...]]
    offsets: tuple[int, ...] = (0, 0, 0, 0, 0, 1, 2, 3, 4, 8)


@dataclass(frozen=True)
class Layout:
    """A memory layout of the inputs of the family's rank: `order` lists the dimensions from outermost to innermost
    in memory (identity: C-contiguous); `accepted`: whether the op takes it (else it must refuse it)."""

    name: str
    order: tuple[int, ...]
    accepted: bool


class Family(ABC):
    """One op and what verifies it."""

    op: Op  # the op it verifies
    dtypes: tuple[str, ...]  # dtype keys: a dtype, or "activations-parameters" ("bf16-f32") for mixed precision
    suites: dict[str, list[Shape]]  # cross-check shapes per backend ("cuda", "host")
    spaces: dict[str, Space]  # random cases per backend
    layouts: tuple[Layout, ...]  # the first is the op's own (contiguous)
    sanitize_shapes: list[Shape]  # small shapes that reach every branch of every kernel
    scalars: dict[str, Any] = {}  # noqa: RUF012 — op scalars the family runs with (fuzz varies them)

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def outputs(self) -> tuple[str, ...]:
        return tuple(o.name for o in self.op.outputs)

    @abstractmethod
    def inputs(self, shape: Shape, dtype: str, seed: int = 0) -> dict[str, np.ndarray]:
        """Seeded random inputs in the storage dtypes of dtype key `dtype` (so the reference sees exactly what the
        kernel reads)."""

    def refusal(self, shape: Shape) -> str | None:
        """What the op must answer a valid-looking case of `shape` with (its ArgumentError's text), where it must
        refuse it (training BatchNorm with one value per channel), else None."""
        return None

    def layout_of(self, plan: Plan) -> Layout:
        """The layout a plan's kernels read (check, sanitize and forced fuzz cases store the inputs in it)."""
        return self.layouts[0]

    def inputs_key(self, plan: Plan) -> str:
        """The dtype key of the inputs `plan` runs on."""
        return plan.kernel.dtype_key

    @abstractmethod
    def reference(self, inputs: dict[str, np.ndarray], plan: Plan) -> tuple[np.ndarray, ...]:
        """The outputs in float64, computed independently of the kernels, with the family's scalars."""

    @abstractmethod
    def plans(self, backend: str, shape: Shape, dtype: str, exhaustive: bool = False) -> list[Plan]:
        """Every plan worth cross-checking on this shape (each kernel variant and mode) on `backend` ("cuda" or
        "host"); `exhaustive`: every CTA size of every kernel instance (the sanitizer runs them)."""

    @abstractmethod
    def tolerances(
        self, plan: Plan, shape: Shape, inputs: dict[str, np.ndarray], ref: tuple[np.ndarray, ...]
    ) -> list[np.ndarray]:
        """Per output, elementwise error bounds derived from the arithmetic (never tuned)."""

    def run(self, plan: Plan | None, arrays: dict[str, Any], backend: str) -> tuple[Any, ...]:
        """Runs the op with `plan` (None: the op's own choice) on `arrays` (device arrays, or NumPy for the host)."""
        out = self.op(*(arrays.get(i.name) for i in self.op.inputs), **self.scalars, backend=backend, plan=plan)
        return out if isinstance(out, tuple) else (out,)

    def choose(self, arrays: dict[str, Any], backend: str) -> Plan:
        """The plan the op picks for `arrays` when none is forced (the one `run(None, arrays, ...)` launches)."""
        op = self.op
        values = tuple(self.scalars.get(s.name, s.default) for s in op.scalars)
        named, problem = op.problem(tuple(arrays.get(i.name) for i in op.inputs), values, backend)
        return op.plan_for(named, problem, backend)


_OPS: dict[str, Op] = {}
_FAMILIES: dict[str, Family] = {}


def register(*items: Op | Family) -> None:
    """Adds ops and families (the package's, or a user's) to the registry."""
    for item in items:
        table: dict[str, Any] = _OPS if isinstance(item, Op) else _FAMILIES
        if not isinstance(item, Op | Family):
            raise ArgumentError(f"register: expected a rust_kernels.runtime.Op or registry.Family, got "
                                f"{type(item).__name__}")  # fmt: skip
        other = table.get(item.name)
        if other is not None and other is not item:
            raise ArgumentError(f"register: {item.name!r} is already registered ({type(other).__name__})")
        table[item.name] = item


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


def ops() -> list[Op]:
    """Every registered op, the package's first."""
    _load_package_families()
    return list(_OPS.values())


def op(name: str) -> Callable[..., Any]:
    """The public op `name` (its generated function: real signature, fast path)."""
    _load_package_families()
    found = _OPS.get(name)
    if found is None:
        raise AttributeError(f"rust_kernels.ops has no op {name!r}")
    return found.function
