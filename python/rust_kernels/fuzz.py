"""`python -m rust_kernels fuzz --cases N --seed S --backend cuda|host`: random cases for every registered family,
each run through the op and compared with the family's float64 reference and tolerances, as `check` does.

A case draws a family, a shape from the family's space (its rank, its dimension pools; zero-size dimensions now and
then), a dtype key, the op scalars the space varies (eps, ...), the inputs' placement (an element offset inside a
bigger buffer, which misaligns the pointers) and layout (one of the family's layouts now and then) and a plan: the
op's own choice, or one of the family's plans forced on it (its inputs then in the layout its kernels read, where the
family accepts several). The inputs are the family's, from a per-case seed. What a case must do:
- inputs in a layout the family does not accept (where the shape makes them non-contiguous) are refused with an
  ArgumentError, never read as another layout;
- a shape the family says the op refuses (`refusal`) is refused with that message;
- a forced plan may be refused on misaligned inputs, and only by one of its kernel's launch preconditions (a
  vectorized kernel needs aligned pointers), never produce garbage;
- everything else, the op's own choice always included, matches the reference within the tolerances.

tests/test_properties.py draws from the same distribution (`draw`) with hypothesis, on the host emulator.
"""

from __future__ import annotations

import argparse
import copy
import math
import secrets
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from rust_kernels import arrays, check, registry
from rust_kernels.dtypes import DTYPES, activations
from rust_kernels.errors import RustKernelsError
from rust_kernels.launch import BACKENDS
from rust_kernels.progress import Progress
from rust_kernels.registry import Family, Layout, Plan

Shape = tuple[int, ...]
# pick(low, high): an integer in [low, high]. NumPy's generator or hypothesis draws it; hypothesis shrinks toward
# `low`, so every choice below lists its simplest value first.
Pick = Callable[[int, int], int]

PRECONDITION = "(requires "  # how a refusal by a kernel's launch precondition ends (args.check_requirements)
ZERO_ONE_IN = 16  # one case in this many has a zero-size dimension
OTHER_LAYOUT_ONE_IN = 16  # and one in this many inputs in another of the family's layouts
OWN_CHOICE_ONE_IN = 3  # one case in this many runs the op's own choice, the others a plan of the family's


@dataclass(frozen=True)
class Case:
    family: Family
    shape: Shape
    dtype: str
    plan: Plan | None  # None: the op's own choice
    scalars: tuple[tuple[str, Any], ...]  # the op scalars drawn (the family's own for the rest)
    offset: int
    layout: Layout
    seed: int  # of the family's inputs

    def __str__(self) -> str:
        plan = "the op's own choice" if self.plan is None else self.plan.label
        scalars = "".join(f" {name}={_shown(value)}" for name, value in self.scalars)
        layout = "" if self.layout is self.family.layouts[0] else f" {self.layout.name}"
        return (f"{self.family.name} {self.shape} {self.dtype} {plan}{scalars} offset={self.offset}{layout} "
                f"seed={self.seed}")  # fmt: skip


def _shown(value: Any) -> str:
    """A scalar in a case's line: numbers shortest, others as they read (an activation's name)."""
    return f"{value:g}" if isinstance(value, int | float) and not isinstance(value, bool) else str(value)


def draw(family: Family, backend: str, pick: Pick) -> Case:
    """One random case of `family` for `backend`."""
    space = family.spaces[backend]
    budget = 2 ** pick(0, space.max_log2_elements)
    dims: list[int] = []
    for pool in reversed(space.dims):
        fitting = [d for d in pool if d <= budget]  # pools start at 1, which always fits
        dims.insert(0, fitting[pick(0, len(fitting) - 1)])
        budget //= dims[0]
    zero = pick(0, ZERO_ONE_IN * len(dims) - 1) - (ZERO_ONE_IN - 1) * len(dims)
    if zero >= 0:
        dims[zero] = 0
    shape = tuple(dims)
    dtype = family.dtypes[pick(0, len(family.dtypes) - 1)]
    scalars = tuple((name, values[pick(0, len(values) - 1)]) for name, values in space.scalars.items())
    offset = space.offsets[pick(0, len(space.offsets) - 1)]
    layout = family.layouts[0]
    if len(family.layouts) > 1 and pick(0, OTHER_LAYOUT_ONE_IN - 1) == OTHER_LAYOUT_ONE_IN - 1:
        layout = family.layouts[1 + pick(0, len(family.layouts) - 2)]
    plan = None
    if pick(0, OWN_CHOICE_ONE_IN - 1) != 0:
        plans = family.plans(backend, shape, dtype)
        plan = plans[pick(0, len(plans) - 1)]
        if family.layout_of(plan).accepted:  # a plan for one memory layout gets its inputs in it
            layout = family.layout_of(plan)
    return Case(family, shape, dtype, plan, scalars, offset, layout, pick(0, 2**31 - 1))


def draws(families: list[Family], backend: str, seed: int) -> Iterator[Case]:
    """An endless stream of cases from NumPy's generator seeded with `seed`: the same seed, the same cases."""
    rng = np.random.default_rng(seed)

    def pick(low: int, high: int) -> int:
        return int(rng.integers(low, high, endpoint=True))

    while True:
        yield draw(families[pick(0, len(families) - 1)], backend, pick)


def with_scalars(family: Family, scalars: tuple[tuple[str, Any], ...]) -> Family:
    """The family with other scalars for its run, reference and tolerances alike."""
    if not scalars:
        return family
    variant = copy.copy(family)
    variant.scalars = family.scalars | dict(scalars)
    return variant


def run_case(case: Case, backend: str) -> tuple[check.Result, str]:
    """Runs one case; returns its result and why it failed ("" if it did what it must)."""
    family = with_scalars(case.family, case.scalars)
    inputs = family.inputs(case.shape, case.dtype, case.seed)
    data = {name: check.placed(a, backend, case.offset, case.layout.order) for name, a in inputs.items()}
    refusal = family.refusal(case.shape)
    if refusal is not None:
        error = "it ran"
        try:
            family.run(case.plan, data, backend)
        except RustKernelsError as err:
            error = str(err)
        return _refused(family, case, error), "" if refusal in error else f"not refused with {refusal!r} ({error})"
    try:
        plan = family.choose(data, backend) if case.plan is None else case.plan
    except RustKernelsError as err:  # the op's own choice refused the inputs (a layout it does not read)
        result = _refused(family, case, str(err))
    else:
        result = check.attempt(family, plan, case.shape, inputs, data, backend, forced=case.plan is not None)
    if not case.layout.accepted and not all(arrays.is_contiguous(a) for a in data.values()):
        refused = "contiguous" in result.error
        why = f"an input in layout {case.layout.name} was not refused ({result.error or 'it ran'})"
        return result, "" if refused else why
    if not result.error:
        return result, "" if result.passed else check.figures(result)
    misaligned = case.offset * DTYPES[activations(case.dtype)].size % 16 != 0
    if case.plan is not None and misaligned and PRECONDITION in result.error:
        return result, ""  # a forced plan that needs aligned pointers, refused by its launch precondition
    return result, result.error


def _refused(family: Family, case: Case, error: str) -> check.Result:
    """The result of a case the op refused before any plan was chosen."""
    return check.Result(family.name, str(case), "", case.dtype, case.shape, math.inf, math.inf, math.inf, 0.0, error)


def _context_lost(backend: str) -> str:
    """After a failure on the GPU: the driver's error if the context is no longer usable (a fault), else ""."""
    if backend != "cuda":
        return ""
    from rust_kernels import driver

    try:
        driver.check(driver.driver_module().cuCtxSynchronize(), "synchronizing after the failure")
    except RustKernelsError as err:
        return str(err)
    return ""


def fuzz(families: list[Family], backend: str, cases: int, seed: int, only: int | None = None) -> tuple[int, int]:
    """Runs `cases` random cases (or only case number `only` of them); prints each failure with its case and a
    summary line. Returns (passed, failed)."""
    stream = draws(families, backend, seed)
    numbered = ((i, next(stream)) for i in range(cases if only is None else only + 1))
    todo = [(i, c) for i, c in numbered if only is None or i == only]
    passed = refused = 0
    failures: list[int] = []
    with Progress(f"fuzz ({backend}, seed {seed})", len(todo)) as progress:
        for index, case in todo:
            progress.advance(str(case))
            result: check.Result | None
            try:
                result, why = run_case(case, backend)
            except Exception as err:  # a bug anywhere (reference, transfer, driver) fails the case, not the run
                result, why = None, f"{type(err).__name__}: {err}"
            if not why:
                passed += 1
                refused += bool(result and result.error)
                continue
            failures.append(index)
            progress.write(f"FAIL case {index}: {case}: {why}")
            lost = _context_lost(backend)
            if lost:
                progress.write(f"stopping: the CUDA context is lost ({lost}); {len(todo) - len(failures) - passed} "
                               "cases not run")  # fmt: skip
                break
    if failures:
        only_these = "" if families == registry.families() else f" --family {' '.join(f.name for f in families)}"
        print(f"reproduce one: python -m rust_kernels fuzz --backend {backend} --seed {seed}{only_these} "
              f"--only {failures[0]}")  # fmt: skip
    print(f"({refused} of the passed cases were refused as they must be: layouts the op refuses, misaligned inputs)")
    print(f"{passed} passed, {len(failures)} failed (seed {seed})")
    return passed, len(failures)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rust_kernels fuzz", description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=1000, help="how many random cases (default 1000)")
    parser.add_argument("--seed", type=int, help="the run's seed (default: a fresh one, printed at the end)")
    parser.add_argument("--backend", choices=BACKENDS, default="cuda")
    parser.add_argument("--family", nargs="+", help="only these families (default: all)")
    parser.add_argument("--only", type=int, metavar="INDEX", help="run only case INDEX of this seed (reproduce it)")
    options = parser.parse_args(argv)
    if options.cases < 1:
        parser.error(f"argument --cases: expected a positive integer, got {options.cases}")
    if options.only is not None and options.only < 0:
        parser.error(f"argument --only: expected a non-negative case index, got {options.only}")
    if options.seed is not None and options.seed < 0:  # NumPy's default_rng takes any non-negative integer
        parser.error(f"argument --seed: expected a non-negative integer, got {options.seed}")
    if options.backend == "cuda":
        from rust_kernels.driver import gpu_available

        usable, why = gpu_available()
        if not usable:
            print(f"error: no GPU to fuzz on ({why}); use --backend host for the CPU emulator", file=sys.stderr)
            return 2
    selected = [registry.family(name) for name in options.family] if options.family else registry.families()
    seed = secrets.randbits(32) if options.seed is None else options.seed
    _, failed = fuzz(selected, options.backend, options.cases, seed, options.only)
    return 1 if failed else 0
