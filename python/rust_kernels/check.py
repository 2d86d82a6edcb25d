"""Cross-check every registered family's kernels against its float64 reference, on the GPU or in the host emulator.

For each family, each shape of its suite, each dtype and each plan worth checking, the op runs on seeded random
inputs and every output element is compared with the reference: PASS iff |got - want| <= the family's tolerance (an
error bound derived from the arithmetic) everywhere. A launch that fails is a failed check, reported with its
reason."""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, TextIO

import numpy as np

from rust_kernels import arrays
from rust_kernels.errors import RustKernelsError
from rust_kernels.progress import Progress
from rust_kernels.registry import Family, Plan, families

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Result:
    family: str
    label: str  # the plan
    kernel: str  # its kernel's name and dtype key, for the report
    dtype: str
    shape: Shape
    max_abs: float  # largest |kernel - reference| over the outputs
    max_rel: float  # largest max|err| / max|reference| over the outputs
    worst: float  # largest err / tolerance over all elements: PASS iff <= 1
    tolerance: float  # the tolerance at that element
    error: str = ""  # why the launch failed, if it did

    @property
    def passed(self) -> bool:
        return not self.error and self.worst <= 1.0


@lru_cache(maxsize=4)
def _inputs(family: Family, shape: Shape, dtype: str, seed: int) -> dict[str, np.ndarray]:
    return family.inputs(shape, dtype, seed)


def compare(family: Family, plan: Plan, shape: Shape, inputs: dict[str, np.ndarray], got: tuple[Any, ...]) -> Result:
    """Compares outputs with the family's reference and tolerances."""
    ref = family.reference(inputs, plan)
    outs = [arrays.to_host(a).astype(np.float64) for a in got]
    worst, tol_at, max_abs, max_rel = 0.0, 0.0, 0.0, 0.0
    for out, want, tol in zip(outs, ref, family.tolerances(plan, shape, inputs, ref), strict=True):
        if out.shape != want.shape:
            return failed(family, plan, shape, f"output shape {out.shape}, expected {want.shape}")
        if out.size == 0:
            continue
        err = np.abs(out - want)
        err[~np.isfinite(out)] = np.inf
        ratio = err / tol
        at = int(np.argmax(ratio))
        if ratio.flat[at] > worst:
            worst, tol_at = float(ratio.flat[at]), float(np.broadcast_to(tol, ratio.shape).flat[at])
        max_abs = max(max_abs, float(err.max()))
        max_rel = max(max_rel, float(err.max() / max(np.abs(want).max(), np.finfo(np.float64).tiny)))
    return Result(family.name, plan.label, plan.kernel.name, family.inputs_key(plan), shape, max_abs, max_rel, worst,
                  tol_at)  # fmt: skip


def failed(family: Family, plan: Plan, shape: Shape, error: str) -> Result:
    return Result(family.name, plan.label, plan.kernel.name, family.inputs_key(plan), shape, math.inf, math.inf,
                  math.inf, 0.0, error)  # fmt: skip


def check_one(family: Family, plan: Plan, shape: Shape, backend: str, seed: int = 0) -> Result:
    """Runs the family's op with `plan` on seeded random data and compares every output with the reference."""
    inputs = _inputs(family, shape, family.inputs_key(plan), seed)
    order = family.layout_of(plan).order
    if order == tuple(range(len(order))):
        data = inputs if backend == "host" else {k: arrays.to_device(a) for k, a in inputs.items()}
    else:
        data = {k: placed(a, backend, 0, order) for k, a in inputs.items()}
    return attempt(family, plan, shape, inputs, data, backend)


def attempt(
    family: Family,
    plan: Plan,
    shape: Shape,
    inputs: dict[str, np.ndarray],
    data: dict[str, Any],
    backend: str,
    forced: bool = True,
) -> Result:
    """Runs the op on `data` (the `inputs`, placed for `backend`) and compares with the reference; an error the op
    raises becomes the result's `error`. `forced=False` lets the op choose its plan, which must be `plan` (the
    family's `choose`): the reference and tolerances follow it."""
    try:
        got = family.run(plan if forced else None, data, backend)
    except RustKernelsError as err:
        return failed(family, plan, shape, str(err))
    return compare(family, plan, shape, inputs, got)


ALIGNMENT = 64  # bytes: the base of every buffer `placed` makes (device allocators align to 256 or more)


def placed(a: np.ndarray, backend: str, offset: int = 0, order: tuple[int, ...] | None = None) -> Any:
    """A copy of `a` for `backend` (NumPy for the host, else a device array) that starts `offset` elements past an
    ALIGNMENT-aligned address inside a bigger buffer, so offset * itemsize decides the pointer's alignment. An
    `order` (a registry.Layout's) stores an array of that rank with its dimensions in that order in memory, behind
    its own shape: a view that is not C-contiguous unless the order is the identity."""
    permuted = order is not None and a.ndim == len(order) and tuple(order) != tuple(range(a.ndim))
    stored = np.transpose(a, order) if permuted else a
    flat = np.ravel(stored)
    host = backend == "host"
    buffer = np.zeros(flat.size + offset + (ALIGNMENT // a.itemsize if host else 0), a.dtype)
    start = offset + (-buffer.ctypes.data % ALIGNMENT) // a.itemsize if host else offset
    buffer[start : start + flat.size] = flat
    device = buffer if host else arrays.to_device(buffer)
    view = device[start : start + flat.size].reshape(stored.shape)
    if not permuted:
        return view
    back = tuple(int(i) for i in np.argsort(order))
    return view.permute(*back) if arrays.is_torch(view) else view.transpose(back)


def launches(plan: Plan, kernels: list[str]) -> bool:
    """Whether a plan launches a kernel of one of these names (`--kernel`: a kernel author's cases)."""
    return any(launch.kernel.name in kernels for launch in plan.launches)


def unknown_kernels(kernels: list[str]) -> str | None:
    """The `--kernel` error naming the names among `kernels` that no catalogue kernel has, or None."""
    from rust_kernels.kernels import CATALOGUE

    unknown = sorted(set(kernels) - {cls.spec.name for cls in CATALOGUE.values()})
    if not unknown:
        return None
    return f"--kernel: no kernel named {', '.join(unknown)} (the catalogue's: rust_kernels.kernels)"


def cases(backend: str, selected: list[Family] | None = None) -> list[tuple[Family, Plan, Shape]]:
    """Every (family, plan, shape) the check runs."""
    out = []
    for family in selected or families():
        for shape in family.suites[backend]:
            for dtype in family.dtypes:
                out += [(family, plan, shape) for plan in family.plans(backend, shape, dtype)]
    return out


def shard_option(value: str) -> tuple[int, int]:
    """A --shard value K/N (check's and sanitize's): part K of N, 1 <= K <= N."""
    k, _, n = value.partition("/")
    if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise argparse.ArgumentTypeError(f"expected K/N with 1 <= K <= N (part K of N), got {value!r}")
    return int(k), int(n)


def shard(todo: list[Any], part: int, parts: int) -> list[Any]:
    """Part `part` (1 to `parts`) of the cases: every parts-th from the part-th, so that each part holds some of every
    family, dtype and plan, and the parts together hold each case once."""
    return todo[part - 1 :: parts]


def run(backend: str, selected: list[Family] | None = None, out: TextIO = sys.stdout,
        where: Callable[[Plan], bool] | None = None, part: tuple[int, int] = (1, 1)) -> list[Result]:  # fmt: skip
    """Checks every family over its suite (only the plans `where` accepts, where given; only shard `part` = (K, N)
    of them: `check --shard K/N`, a long GPU check split over calls of limited time); prints one line per failure
    and a table per family, returns results."""
    todo = shard([c for c in cases(backend, selected) if where is None or where(c[1])], *part)
    if part[1] > 1:
        print(f"shard {part[0]} of {part[1]}: {len(todo)} cases", file=out)
    results: list[Result] = []
    try:
        if backend == "host":
            build_for_host(plan for _, plan, _ in todo)
        with Progress(f"check ({backend})", len(todo)) as progress:
            for family, plan, shape in todo:
                progress.advance(f"{plan.label} {shape}")
                result = check_one(family, plan, shape, backend)
                if not result.passed:
                    progress.write(f"FAIL {family.name}: {plan.label} {shape}: {result.error or figures(result)}")
                results.append(result)
    except KeyboardInterrupt:  # Ctrl-C, or a time limit's SIGTERM (the CLI's): what ran is reported, then it stops
        print(f"interrupted after {len(results)} of {len(todo)} cases", file=out)
        report(results, out)
        raise
    report(results, out)
    return results


def build_for_host(plans: Iterable[Plan]) -> None:
    """The emulator's builds of the plans' kernels, one per CPU at a time, ahead of their checks (which would build
    them one by one). A failed build stops this: the cases that need the kernel then fail on their own."""
    from rust_kernels import builder

    kernels = dict.fromkeys(launch.kernel for plan in plans for launch in plan.launches)
    with Progress("build (host)", len(kernels)) as progress, contextlib.suppress(RustKernelsError):
        builder.cached_entries([(k, builder.HOST) for k in kernels], builder.default_jobs(),
                               lambda kernel, _: progress.advance(kernel.id))  # fmt: skip


def figures(r: Result) -> str:
    return f"max abs err {r.max_abs:.3e}, max rel err {r.max_rel:.3e}, err/tol {r.worst:.3f}"


def report(results: list[Result], out: TextIO = sys.stdout) -> None:
    """Per family and kernel dtype: cases, worst error/tolerance and normwise relative error."""
    print(f"{'family':<40} {'plan (kernel, dtype)':<48} {'cases':>6} {'worst err/tol':>14} {'max rel err':>12}",
          file=out)  # fmt: skip
    groups: dict[tuple[str, str], list[Result]] = {}
    for r in results:
        groups.setdefault((r.family, f"{r.kernel} {r.dtype}"), []).append(r)
    for (family, label), rows in groups.items():
        worst = max(r.worst for r in rows)
        rel = max(r.max_rel for r in rows)
        failed = sum(not r.passed for r in rows)
        flag = f"  {failed} FAILED" if failed else ""
        print(f"{family:<40} {label:<48} {len(rows):>6} {worst:>14.3f} {rel:>12.1e}{flag}", file=out)
    failed = sum(not r.passed for r in results)
    print(f"{len(results) - failed} passed, {failed} failed", file=out)
