"""`python -m rust_kernels fuzz --cases N --seed S --backend cuda|host`: random cases for every registered family,
each run through the op and compared with the family's float64 reference and tolerances, as `check` does.

A case draws a family, a shape (zero-size dimensions, H*W = 1, primes, large ones on the GPU), a dtype, eps, the
inputs' placement (an element offset inside a bigger buffer, which misaligns the pointers, and now and then a
channels-last view) and a plan: the op's own choice, or one of the family's plans forced on it. The inputs are the
family's, from a per-case seed. What a case must do:
- channels-last (non-C-contiguous) inputs are refused with an ArgumentError, never read as if they were NCHW;
- a forced plan may be refused on misaligned inputs, and only by one of its kernel's launch preconditions (a
  vectorized kernel needs aligned pointers), never produce garbage;
- everything else, the op's own choice always included, matches the reference within the tolerances.

tests/test_properties.py draws from the same distribution (SPACES, `draw`) with hypothesis, on the host emulator.
"""

from __future__ import annotations

import argparse
import copy
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
from rust_kernels.registry import Family, Plan

Shape = tuple[int, ...]
# pick(low, high): an integer in [low, high]. NumPy's generator or hypothesis draws it; hypothesis shrinks toward
# `low`, so every choice below lists its simplest value first.
Pick = Callable[[int, int], int]

PRECONDITION = "(requires "  # how a refusal by a kernel's launch precondition ends (args.check_requirements)


@dataclass(frozen=True)
class Space:
    """Where a backend's cases come from. A case holds at most 2**k elements, k drawn in [0, max_log2_elements];
    its dimensions are drawn last to first from their pools, among the values that still fit."""

    dims: tuple[tuple[int, ...], ...]  # one pool per dimension (B, C, H, W), without 0: see ZERO_ONE_IN
    max_log2_elements: int
    eps: tuple[float, ...]
    offsets: tuple[int, ...]  # elements between an aligned address and the inputs (0: aligned)


# The host emulator runs every thread of a CTA as an OS thread (about 0.1 ms each): few channels and rows there.
SPACES = {
    "host": Space(
        dims=((1, 2, 3), (1, 2, 3, 5), (1, 2, 3, 4, 7, 13, 16), (1, 2, 3, 5, 8, 17, 31, 64, 1031)),
        max_log2_elements=12,
        eps=(1e-5, 0.0, 1e-3, 0.1, 1.0, 1e3),
        offsets=(0, 0, 0, 0, 0, 1, 2, 3, 4, 8),
    ),
    "cuda": Space(
        dims=(
            (1, 2, 3, 4, 5, 8, 16, 32, 64),
            (1, 2, 3, 4, 7, 16, 33, 61, 130, 256, 1031, 2053),
            (1, 2, 3, 5, 7, 13, 14, 28, 31, 56, 112),
            (1, 2, 3, 4, 5, 7, 8, 14, 17, 28, 56, 64, 112, 1031, 4099),
        ),
        max_log2_elements=22,
        eps=(1e-5, 0.0, 1e-12, 1e-3, 0.1, 1.0, 1e3),
        offsets=(0, 0, 0, 0, 0, 1, 2, 3, 4, 8),
    ),
}
ZERO_ONE_IN = 16  # one case in this many has a zero-size dimension
CHANNELS_LAST_ONE_IN = 16  # and one in this many channels-last inputs
OWN_CHOICE_ONE_IN = 3  # one case in this many runs the op's own choice, the others a plan of the family's


@dataclass(frozen=True)
class Case:
    family: Family
    shape: Shape
    dtype: str
    plan: Plan | None  # None: the op's own choice
    eps: float | None  # None: the family's own (a family without an eps)
    offset: int
    channels_last: bool
    seed: int  # of the family's inputs

    def __str__(self) -> str:
        plan = "the op's own choice" if self.plan is None else self.plan.label
        eps = "" if self.eps is None else f" eps={self.eps:g}"
        layout = " channels-last" if self.channels_last else ""
        return (f"{self.family.name} {self.shape} {self.dtype} {plan}{eps} offset={self.offset}{layout} "
                f"seed={self.seed}")  # fmt: skip


def draw(family: Family, backend: str, pick: Pick) -> Case:
    """One random case of `family` for `backend`."""
    space = SPACES[backend]
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
    eps = space.eps[pick(0, len(space.eps) - 1)] if getattr(family, "eps", None) is not None else None
    offset = space.offsets[pick(0, len(space.offsets) - 1)]
    channels_last = pick(0, CHANNELS_LAST_ONE_IN - 1) == CHANNELS_LAST_ONE_IN - 1
    plan = None
    if pick(0, OWN_CHOICE_ONE_IN - 1) != 0:
        plans = family.plans(backend, shape, dtype)
        plan = plans[pick(0, len(plans) - 1)]
    return Case(family, shape, dtype, plan, eps, offset, channels_last, pick(0, 2**31 - 1))


def draws(families: list[Family], backend: str, seed: int) -> Iterator[Case]:
    """An endless stream of cases from NumPy's generator seeded with `seed`: the same seed, the same cases."""
    rng = np.random.default_rng(seed)

    def pick(low: int, high: int) -> int:
        return int(rng.integers(low, high, endpoint=True))

    while True:
        yield draw(families[pick(0, len(families) - 1)], backend, pick)


def _with_eps(family: Family, eps: float | None) -> Family:
    """The family with another eps for its run, reference and tolerances alike."""
    if eps is None:
        return family
    variant = copy.copy(family)
    variant.eps = eps  # type: ignore[attr-defined]
    return variant


def _contiguous(a: Any) -> bool:
    return bool(a.is_contiguous()) if arrays.is_torch(a) else bool(a.flags.c_contiguous)


def run_case(case: Case, backend: str) -> tuple[check.Result, str]:
    """Runs one case; returns its result and why it failed ("" if it did what it must)."""
    family = _with_eps(case.family, case.eps)
    inputs = family.inputs(case.shape, case.dtype, case.seed)
    data = {name: check.placed(a, backend, case.offset, case.channels_last) for name, a in inputs.items()}
    plan = family.choose(data, backend) if case.plan is None else case.plan
    result = check.attempt(family, plan, case.shape, inputs, data, backend, forced=case.plan is not None)
    if not all(_contiguous(a) for a in data.values()):
        refused = "contiguous" in result.error
        return result, "" if refused else f"a channels-last input was not refused ({result.error or 'it ran'})"
    if not result.error:
        return result, "" if result.passed else check.figures(result)
    misaligned = case.offset * DTYPES[activations(case.dtype)].size % 16 != 0
    if case.plan is not None and misaligned and PRECONDITION in result.error:
        return result, ""  # a forced plan that needs aligned pointers, refused by its launch precondition
    return result, result.error


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
    print(f"({refused} of the passed cases were refused as they must be: channels-last or misaligned inputs)")
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
    if options.cases < 1 or (options.only is not None and options.only < 0):
        parser.error("--cases must be at least 1 and --only non-negative")
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
