"""What benchmarks an op: per registered family, a `Baseline` — its bench shapes, the least bytes a call must move
(the memory bound's numerator) and the columns to time: ours (and its modes), the baselines a user would pick
instead (PyTorch eager, torch.compile of the same maths) and `bound`, a call that moves the same bytes. The inputs
and dtypes are the family's. One module here per package family (loaded on first use); a user's with `register`.
"""

from __future__ import annotations

import copy
import importlib
import pkgutil
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

from rust_kernels import registry
from rust_kernels.errors import ArgumentError

Shape = tuple[int, ...]


class Baseline:
    """A benchmark of family `family` (a registered family's name: its inputs and dtypes); `name` tells several of
    one family apart."""

    family: str
    bench_shapes: list[Shape] = []  # noqa: RUF012 (class-level default, replaced per family)
    suite: str | None = None  # the shape suite `bench --suite` times it over (bench/suites/<suite>.json)
    activation: str | None = None  # the activation its op fuses, where it fuses one
    activations: tuple[str, ...] = ()  # those `with_activation` may give it instead

    @property
    def name(self) -> str:
        return self.family

    @property
    def dtypes(self) -> tuple[str, ...]:
        return registry.family(self.family).dtypes

    def inputs(self, shape: Shape, dtype: str) -> dict[str, np.ndarray]:
        return registry.family(self.family).inputs(shape, dtype)

    def moved_bytes(self, shape: Shape, dtype: str) -> int:
        """The least bytes a call must move."""
        raise NotImplementedError

    def bench_calls(self, tensors: dict[str, Any]) -> dict[str, Callable[[], Any]]:
        """Columns to time on PyTorch tensors. Needs PyTorch."""
        raise NotImplementedError


_BASELINES: dict[str, Baseline] = {}


def register(baseline: Baseline) -> Baseline:
    if not isinstance(baseline, Baseline):
        raise ArgumentError(
            f"baseline: expected a rust_kernels.bench.baselines.Baseline, got {type(baseline).__name__}"
        )
    _BASELINES[baseline.name] = baseline
    return baseline


@cache
def _load_package_baselines() -> None:
    for module in pkgutil.iter_modules(__path__, f"{__name__}."):
        importlib.import_module(module.name)


def baselines() -> list[Baseline]:
    """The baselines of every registered family that has some, in the registry's order."""
    _load_package_baselines()
    return [b for f in registry.families() for b in _BASELINES.values() if b.family == f.name]


def with_activation(b: Baseline, activation: str) -> Baseline:
    """`b` with another fused activation (`tune --activation`): a copy, named for it, whose ours, eager and compiled
    columns all apply it; `b` itself where it fuses none."""
    if b.activation is None:
        return b
    if activation not in b.activations:
        raise ArgumentError(f"activation: {b.name} fuses one of {list(b.activations)}, got {activation!r}")
    other = copy.copy(b)
    other.activation = activation
    return other


def baseline(name: str) -> Baseline:
    for b in baselines():
        if b.name == name:
            return b
    raise ArgumentError(f"family: no benchmark for {name!r} (benchmarked: {[b.name for b in baselines()]})")
