"""The op benchmark: for each registered family, bench shape and dtype, every column of `family.bench_calls` timed on
the same tensors in one process (GPU µs per call); on the family's smallest shape also the host µs per call."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from rust_kernels import arrays
from rust_kernels.bench import suite
from rust_kernels.bench.baselines import Baseline
from rust_kernels.bench.report import COLUMNS, HostResult, OpResult, Shape, fmt, shape_label
from rust_kernels.bench.timing import WARMUP, GpuTimer, host_us_interleaved

HOST_CALLS = 1000  # calls per round of the host-time measurement
REQUIRED = ("ours", "torch", "compile", "bound")  # the columns every family's bench_calls returns
MAX_REASON = 4000  # characters of a failure's message shown (compiler errors can run to pages)


@dataclass
class Failures:
    """Why columns could not be measured. The first failure of each (family, column) is printed with its reason;
    later ones are only counted, and `lines` sums them up at the end."""

    out: TextIO | None = None
    seen: dict[tuple[str, str], tuple[str, int]] = field(default_factory=dict)

    def record(self, family: str, column: str, where: str, err: BaseException) -> None:
        key = (family, column)
        if key in self.seen:
            reason, count = self.seen[key]
            self.seen[key] = (reason, count + 1)
            return
        reason = f"{type(err).__name__}: {err}"[:MAX_REASON]
        self.seen[key] = (reason, 1)
        print(f"  {column} n/a for {family} {where}: {reason}", file=self.out or sys.stdout, flush=True)

    def failed(self, column: str) -> bool:
        return any(c == column for _, c in self.seen)

    def merge(self, other: Failures) -> None:
        """Another run's failures (of other families) added to these."""
        self.seen.update(other.seen)

    def lines(self) -> list[str]:
        return [
            f"{family} {column}: n/a in {count} case(s); first reason: {reason.splitlines()[0] if reason else ''}"
            for (family, column), (reason, count) in self.seen.items()
        ]


def measure_columns(
    calls: Mapping[str, Callable[[], Any]],
    measure: Callable[[Mapping[str, Callable[[], Any]]], dict[str, float]],
    failures: Failures,
    family: str,
    where: str,
) -> dict[str, float | None]:
    """`measure(calls)` (GpuTimer.medians_us: interleaved) over each known column the family has, in report order;
    None where a column raised (a failing column must not end the run nor lose the other columns). Each is called
    once first; should one raise only later, inside `measure`, the columns are timed one at a time instead."""
    out: dict[str, float | None] = {}
    working: dict[str, Callable[[], Any]] = {}
    for column in (c for c in COLUMNS if c in calls):
        try:
            calls[column]()
            working[column] = calls[column]
        except Exception as err:
            out[column] = None
            failures.record(family, column, where, err)
    try:
        out |= measure(working) if working else {}
    except Exception:
        for column, call in working.items():
            try:
                out[column] = measure({column: call})[column]
            except Exception as err:
                out[column] = None
                failures.record(family, column, where, err)
    return {c: out[c] for c in COLUMNS if c in out}


def measure_host(
    calls: Mapping[str, Callable[[], Any]],
    per_round: int,
    sync: Callable[[], None],
    failures: Failures,
    family: str,
    where: str,
) -> dict[str, float | None]:
    """Host µs per call of each known column, timed in interleaved rounds (timing.host_us_interleaved); None for a
    column whose warm-up raised."""
    warm: dict[str, Callable[[], Any]] = {}
    out: dict[str, float | None] = {}
    for column in (c for c in COLUMNS if c in calls):
        try:
            for _ in range(WARMUP):
                calls[column]()
            warm[column] = calls[column]
        except Exception as err:
            out[column] = None
            failures.record(family, column, where, err)
    times = host_us_interleaved(warm, per_round, sync=sync)
    return {c: times.get(c, out.get(c)) for c in COLUMNS if c in calls}


def why_not_benchmarked(family: Baseline, shapes: Sequence[Shape] | None) -> str | None:
    """Why `family` cannot be benchmarked, or None."""
    if type(family).bench_calls is Baseline.bench_calls:
        return "it defines no bench_calls"
    if type(family).moved_bytes is Baseline.moved_bytes:
        return "it defines no moved_bytes"
    if not (shapes or family.bench_shapes):
        return "it has no bench_shapes (give --shapes)"
    return None


def host_shape(shapes: Sequence[Shape]) -> Shape:
    """The shape the host cost is measured on: the smallest, so the GPU keeps pace with the host."""
    return min(shapes, key=math.prod)


def device_tensors(family: Baseline, shape: Shape, dtype: str) -> dict[str, Any]:
    """The family's seeded inputs as PyTorch tensors on the GPU (bf16 moved as bits)."""
    return {name: arrays.to_device(a) for name, a in family.inputs(shape, dtype).items()}


def reset_compiled(torch: Any) -> None:
    """Drops torch.compile's caches: every case compiles afresh, so later shapes never hit the recompile limit (8 by
    default per function), past which Dynamo silently runs the eager code instead."""
    dynamo = getattr(torch, "_dynamo", None)
    if dynamo is not None:
        dynamo.reset()


@dataclass
class Run:
    """What one op benchmark produced."""

    results: list[OpResult] = field(default_factory=list)
    hosts: list[HostResult] = field(default_factory=list)
    failures: Failures = field(default_factory=Failures)


def run(
    torch: Any,
    families: Sequence[Baseline],
    dtypes: Sequence[str],
    reps: int,
    shapes: Sequence[Shape] | None = None,
    host_calls: int = HOST_CALLS,
    compile_every: int = 1,
    deadline: float = math.inf,
) -> Run:
    """Every family x dtype x shape (`shapes` overrides each family's bench_shapes), shape by shape in suite.spread's
    order, so that a run cut short by `deadline` (a time.perf_counter() value) has every family on the same shapes,
    spread over the list. torch.compile is timed on every `compile_every`-th shape only (each shape compiles afresh,
    seconds each; 0: on none); elsewhere its column is n/a."""
    timer = GpuTimer(torch, reps)
    gpu_time = timer.medians_us
    out = Run()
    cases = []
    for family in families:
        why = why_not_benchmarked(family, shapes)
        if why is not None:
            print(f"{family.name}: not benchmarked: {why}", flush=True)
            continue
        skipped = [d for d in dtypes if d not in family.dtypes]
        if skipped:
            print(f"{family.name}: not benchmarked in {skipped} (its dtypes: {list(family.dtypes)})", flush=True)
        family_shapes = list(shapes or family.bench_shapes)
        tiny = host_shape(family_shapes)
        cases += [
            (i, family, s, d, tiny, compile_every > 0 and i % compile_every == 0)
            for d in dtypes
            if d in family.dtypes
            for i, s in enumerate(family_shapes)
        ]
    cases = suite.by_spread(cases)
    print(f"op benchmark: {len(cases)} cases, median of {reps} (L2 flushed), host cost: {host_calls} calls", flush=True)
    for number, (family, shape, dtype, tiny, compiled) in enumerate(cases, 1):
        if time.perf_counter() >= deadline:
            print(f"op benchmark: over its time budget (--budget): {len(cases) - number + 1} of {len(cases)} cases "
                  "not begun", flush=True)  # fmt: skip
            break
        where = f"{shape_label(shape)} {dtype}"
        reset_compiled(torch)
        try:
            calls = family.bench_calls(device_tensors(family, shape, dtype))
            if not compiled:
                calls.pop("compile", None)
        except Exception as err:
            out.failures.record(family.name, "setup", where, err)
            calls = {}
        us = measure_columns(calls, gpu_time, out.failures, family.name, where) if calls else dict.fromkeys(REQUIRED)
        result = OpResult(family.name, shape, dtype, us, family.moved_bytes(shape, dtype))
        out.results.append(result)
        shown = ", ".join(f"{c} {fmt(result.time(c), '.1f')}" for c in result.columns())
        print(f"[{number}/{len(cases)}] {family.name} {where}: {shown} µs", flush=True)
        if shape == tiny and calls:
            host = measure_host(calls, host_calls, torch.cuda.synchronize, out.failures, family.name, f"{where} (host)")
            out.hosts.append(HostResult(family.name, shape, dtype, host))
    return out
