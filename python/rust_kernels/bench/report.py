"""The benchmark's results and everything made of them: ratios, summaries, CSV files, the printed tables, the PNG
and the log. Pure: no GPU and no PyTorch needed (matplotlib only for the PNG)."""

from __future__ import annotations

import contextlib
import csv
import io
import math
import statistics
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

Shape = tuple[int, ...]
# Every column a family may time, in report order (registry.Family.bench_calls): "ours_atomic" and "ours_op" (the op
# called as torch.ops.rust_kernels.<name>, through PyTorch's dispatcher) are optional.
COLUMNS = ("ours", "ours_atomic", "ours_op", "torch", "compile", "bound")
COMPARED = tuple(c for c in COLUMNS if c != "bound")  # the columns set against the bound
BASELINES = ("torch", "compile")  # what a user would pick instead: ours' speedup is reported against each
LABELS = {"ours": "ours", "ours_atomic": "atomic", "ours_op": "torch.ops", "torch": "torch", "compile": "compile",
          "bound": "bound"}  # fmt: skip
LARGE_BYTES = 8e6  # shapes moving at least this much are held to the bound in the summary
ABSENT = ""  # a column the family does not have, in CSV files (a column that failed reads "n/a")


# --- arithmetic -----------------------------------------------------------------------------------------------------
def ratio(numerator: float | None, denominator: float | None) -> float | None:
    return None if numerator is None or denominator is None else numerator / denominator


def gbps(nbytes: int, us: float | None) -> float | None:
    return None if us is None else nbytes / (us * 1e3)


def _known(values: Iterable[float | None]) -> list[float]:
    return [v for v in values if v is not None]


def median(values: Iterable[float | None]) -> float | None:
    known = _known(values)
    return statistics.median(known) if known else None


def minimum(values: Iterable[float | None]) -> float | None:
    return min(_known(values), default=None)


def fmt(value: float | None, spec: str = ".2f") -> str:
    return "n/a" if value is None else format(value, spec)


def times(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def shape_label(shape: Sequence[int]) -> str:
    return "x".join(map(str, shape))


# --- results --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Timings:
    """µs per column for one (family, shape, dtype): a key for each column the family has, None where it failed."""

    family: str
    shape: Shape
    dtype: str
    us: Mapping[str, float | None]

    def columns(self) -> list[str]:
        return [c for c in COLUMNS if c in self.us]

    def time(self, column: str) -> float | None:
        return self.us.get(column)


@dataclass(frozen=True, eq=False)
class OpResult(Timings):
    """GPU time per call (median of the repetitions) and the bytes a call must move."""

    nbytes: int

    def gbps(self, column: str) -> float | None:
        return gbps(self.nbytes, self.time(column))

    def fraction_of_bound(self, column: str = "ours") -> float | None:
        return ratio(self.time("bound"), self.time(column))

    def speedup(self, baseline: str) -> float | None:
        """How many times faster ours is than `baseline` (>1: ours is faster)."""
        return ratio(self.time(baseline), self.time("ours"))

    @property
    def deterministic_cost(self) -> float | None:
        """ours (deterministic, the default) over ours with float atomics; None where the family has no atomic mode."""
        return ratio(self.time("ours"), self.time("ours_atomic"))


@dataclass(frozen=True, eq=False)
class HostResult(Timings):
    """Host µs per call, issued back to back without synchronising."""

    @property
    def ours_over_torch(self) -> float | None:
        """The op's host cost against PyTorch's native op (issue target: at most 0.5)."""
        return ratio(self.time("ours"), self.time("torch"))


@dataclass(frozen=True)
class Summary:
    family: str
    dtype: str
    median_fraction: float | None  # of the bound, over all shapes
    min_fraction_large: float | None  # of the bound, over shapes moving >= LARGE_BYTES
    median_vs_torch: float | None
    min_vs_torch: float | None
    median_vs_compile: float | None
    min_vs_compile: float | None
    median_det_cost: float | None
    host_ours_over_torch: float | None


def _groups(rows: Sequence[Timings]) -> dict[tuple[str, str], list]:
    """Rows per (family, dtype), in the order each first appears."""
    groups: dict[tuple[str, str], list] = {}
    for r in rows:
        groups.setdefault((r.family, r.dtype), []).append(r)
    return groups


def summarize(results: Sequence[OpResult], hosts: Sequence[HostResult] = ()) -> list[Summary]:
    """Per (family, dtype), in the order they first appear."""
    host_ratio = {key: median(h.ours_over_torch for h in rows) for key, rows in _groups(hosts).items()}
    summaries = []
    for (family, dtype), rows in _groups(results).items():
        large = [r for r in rows if r.nbytes >= LARGE_BYTES]
        summaries.append(
            Summary(
                family,
                dtype,
                median(r.fraction_of_bound() for r in rows),
                minimum(r.fraction_of_bound() for r in large),
                median(r.speedup("torch") for r in rows),
                minimum(r.speedup("torch") for r in rows),
                median(r.speedup("compile") for r in rows),
                minimum(r.speedup("compile") for r in rows),
                median(r.deterministic_cost for r in rows),
                host_ratio.get((family, dtype)),
            )
        )
    return summaries


# --- CSV -------------------------------------------------------------------------------------------------------------
BENCH_FIELDS = ["family", "shape", "dtype", "bytes"]
BENCH_FIELDS += [f"us_{c}" for c in COLUMNS] + [f"gbps_{c}" for c in COLUMNS]
BENCH_FIELDS += [f"fraction_of_bound_{c}" for c in COMPARED]
BENCH_FIELDS += [f"speedup_vs_{b}" for b in BASELINES] + ["deterministic_cost"]
HOST_FIELDS = ["family", "shape", "dtype", *(f"host_us_{c}" for c in COLUMNS), "ours_over_torch"]
SUITE_FIELDS = ["op", "shape", "dtype", "bytes", "ours_us", "torch_us", "compile_us", "bound_us", "fraction_of_bound",
                "vs_torch", "vs_compile"]  # fmt: skip
LAUNCH_FIELDS = ["section", "name", "value", "unit", "gpu_us_per_kernel", "ratio_to_floor", "note"]


def _cell(r: Timings, column: str, value: float | None, spec: str) -> str:
    """A figure derived from `column`: empty where the family has no such column, n/a where it failed."""
    return ABSENT if column not in r.us else fmt(value, spec)


def csv_row(r: OpResult) -> dict[str, str]:
    row = {"family": r.family, "shape": shape_label(r.shape), "dtype": r.dtype, "bytes": str(r.nbytes)}
    row |= {f"us_{c}": _cell(r, c, r.time(c), ".3f") for c in COLUMNS}
    row |= {f"gbps_{c}": _cell(r, c, r.gbps(c), ".1f") for c in COLUMNS}
    row |= {f"fraction_of_bound_{c}": _cell(r, c, r.fraction_of_bound(c), ".4f") for c in COMPARED}
    row |= {f"speedup_vs_{b}": _cell(r, b, r.speedup(b), ".4f") for b in BASELINES}
    return row | {"deterministic_cost": _cell(r, "ours_atomic", r.deterministic_cost, ".4f")}


def suite_csv_row(r: OpResult) -> dict[str, str]:
    """One row of bench_suite.csv: the op's times, its fraction of the bound and its speedups (ours / theirs)."""
    row = {"op": r.family, "shape": shape_label(r.shape), "dtype": r.dtype, "bytes": str(r.nbytes)}
    row |= {f"{c}_us": _cell(r, c, r.time(c), ".3f") for c in ("ours", "torch", "compile", "bound")}
    row["fraction_of_bound"] = _cell(r, "ours", r.fraction_of_bound("ours"), ".4f")
    return row | {f"vs_{b}": _cell(r, b, r.speedup(b), ".4f") for b in BASELINES}


def host_csv_row(h: HostResult) -> dict[str, str]:
    row = {"family": h.family, "shape": shape_label(h.shape), "dtype": h.dtype}
    row |= {f"host_us_{c}": _cell(h, c, h.time(c), ".3f") for c in COLUMNS}
    return row | {"ours_over_torch": _cell(h, "torch", h.ours_over_torch, ".4f")}


def write_dicts(path: Path, fields: list[str], rows: Iterable[dict[str, str]]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fields)
        writer.writeheader()
        writer.writerows(rows)


def write_csv(results: Sequence[OpResult], path: Path) -> None:
    write_dicts(path, BENCH_FIELDS, map(csv_row, results))


def write_suite_csv(results: Sequence[OpResult], path: Path) -> None:
    write_dicts(path, SUITE_FIELDS, map(suite_csv_row, results))


def write_host_csv(hosts: Sequence[HostResult], path: Path) -> None:
    write_dicts(path, HOST_FIELDS, map(host_csv_row, hosts))


# --- printed tables -----------------------------------------------------------------------------------------------
def _out(out: TextIO | None) -> TextIO:
    return sys.stdout if out is None else out  # looked up at call time, so a redirected stdout (the log) is used


def _by_family(rows: Sequence[Timings]) -> dict[str, list]:
    families: dict[str, list] = {}
    for r in rows:
        families.setdefault(r.family, []).append(r)
    return families


def _present(rows: Sequence[Timings], columns: Sequence[str] = COLUMNS) -> list[str]:
    return [c for c in columns if any(c in r.us for r in rows)]


def _table(head: Sequence[tuple[str, int]], lines: Iterable[Sequence[str]], out: TextIO) -> None:
    """A line of headers (title, width), then one per row of cells: the first left-aligned, the others right-aligned."""
    (first, first_width), *rest = head
    print(f"{first:<{first_width}}" + "".join(f" {h:>{w}}" for h, w in rest), file=out)
    for cells in lines:
        print(f"{cells[0]:<{first_width}}" + "".join(f" {c:>{w}}" for c, (_, w) in zip(cells[1:], rest, strict=True)),
              file=out)  # fmt: skip


def _op_cells(r: OpResult, columns: list[str], baselines: list[str]) -> list[str]:
    compared = [c for c in columns if c != "bound"]
    cells = [shape_label(r.shape), r.dtype, f"{r.nbytes / 1e6:.2f}"]
    cells += [fmt(r.time(c), ".1f") for c in columns] + [fmt(r.gbps("ours"), ".0f")]
    cells += [fmt(r.fraction_of_bound(c), ".3f") for c in compared] + [times(r.speedup(b)) for b in baselines]
    return cells + ([times(r.deterministic_cost)] if "ours_atomic" in columns else [])


def print_table(results: Sequence[OpResult], out: TextIO | None = None) -> None:
    """Per family: µs per column, ours' GB/s, each column's fraction of the bound, ours' speedups against the
    baselines (bench.csv has GB/s for every column)."""
    out = _out(out)
    for family, rows in _by_family(results).items():
        columns, baselines = _present(rows), _present(rows, BASELINES)
        head = [("shape", 18), ("dtype", 5), ("MB", 8)]
        head += [(f"{LABELS[c]} µs", 10) for c in columns] + [("ours GB/s", 9)]
        head += [(f"{LABELS[c]}/bd", 10) for c in columns if c != "bound"] + [(f"vs {b}", 10) for b in baselines]
        head += [("det cost", 8)] if "ours_atomic" in columns else []
        print(f"{family}: GPU µs per call (median), fraction of the bound (bound µs / µs), speedups", file=out)
        _table(head, (_op_cells(r, columns, baselines) for r in rows), out)


def print_host(hosts: Sequence[HostResult], calls: int, out: TextIO | None = None) -> None:
    """Per family: host µs per call of each column, and ours over PyTorch's."""
    out = _out(out)
    for family, rows in _by_family(hosts).items():
        columns = _present(rows)
        head = [("shape", 18), ("dtype", 5)] + [(f"{LABELS[c]} µs", 10) for c in columns] + [("ours/torch", 10)]
        lines = (
            [shape_label(h.shape), h.dtype, *(fmt(h.time(c), ".2f") for c in columns), fmt(h.ours_over_torch)]
            for h in rows
        )
        text = f"{calls} calls back to back, unsynchronised; median of rounds interleaving the columns"
        print(f"{family}: host µs per call ({text})", file=out)
        _table(head, lines, out)


def print_summary(summaries: Sequence[Summary], out: TextIO | None = None) -> None:
    out = _out(out)
    for s in summaries:
        text = (
            f"{s.family} {s.dtype}: fraction of bound median {fmt(s.median_fraction, '.3f')}, "
            f"min over shapes moving >= {LARGE_BYTES / 1e6:.0f} MB {fmt(s.min_fraction_large, '.3f')}; "
            f"speedup vs torch median {times(s.median_vs_torch)}, min {times(s.min_vs_torch)}; "
            f"vs torch.compile median {times(s.median_vs_compile)}, min {times(s.min_vs_compile)}"
        )
        if s.median_det_cost is not None:
            text += f"; deterministic cost median {times(s.median_det_cost)}"
        if s.host_ours_over_torch is not None:
            text += f"; host cost ours/torch {s.host_ours_over_torch:.2f}"
        print(text, file=out)


# --- PNG -------------------------------------------------------------------------------------------------------------
def write_png(results: Sequence[OpResult], path: Path) -> None:
    """Fraction of the bound per shape: one panel per (family, dtype), one bar per compared column. Needs
    matplotlib (ImportError without it)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    groups = _groups(results)
    figure = Figure(figsize=(12, 3.6 * len(groups)))
    FigureCanvasAgg(figure)
    for panel, ((family, dtype), rows) in enumerate(groups.items(), 1):
        axes = figure.add_subplot(len(groups), 1, panel)
        compared = _present(rows, COMPARED)
        width = 0.8 / max(1, len(compared))
        for index, column in enumerate(compared):
            heights = [r.fraction_of_bound(column) for r in rows]
            positions = [i + (index - (len(compared) - 1) / 2) * width for i in range(len(rows))]
            bars = [math.nan if h is None else h for h in heights]
            color = f"C{COMPARED.index(column)}"  # one colour per column in every panel
            axes.bar(positions, bars, width, label=LABELS[column], color=color)
        axes.axhline(1.0, color="black", linewidth=1, label="bound")
        axes.axhline(0.95, color="red", linestyle="--", linewidth=1, label="0.95 of bound")
        axes.set_xticks(range(len(rows)), [shape_label(r.shape) for r in rows], fontsize=8)
        axes.set_ylabel("t_bound / t")
        axes.set_title(f"{family}, {dtype}: fraction of the memory bound (an op moving the same bytes)", fontsize=10)
        axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def write_suite_png(results: Sequence[OpResult], path: Path) -> None:
    """A shape suite at a glance: per (family, dtype), the fraction of the bound of each compared column over the
    suite's shapes, each column sorted (a distribution: the median at the middle), with the targets' lines; and
    ours' speedup over PyTorch eager and torch.compile, sorted. Needs matplotlib (ImportError without it)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    groups = _groups(results)
    figure = Figure(figsize=(13, 3.4 * len(groups)))
    FigureCanvasAgg(figure)
    for panel, ((family, dtype), rows) in enumerate(groups.items()):
        left = figure.add_subplot(len(groups), 2, 2 * panel + 1)
        for column in _present(rows, COMPARED):
            values = sorted(v for r in rows if (v := r.fraction_of_bound(column)) is not None)
            left.plot(_quantiles(len(values)), values, label=LABELS[column], color=f"C{COMPARED.index(column)}")
        for level, style in ((0.92, "--"), (0.80, ":")):
            left.axhline(level, color="red", linestyle=style, linewidth=1, label=f"{level:.2f} of bound")
        left.set_xlabel("share of the suite's shapes")
        left.set_ylabel("t_bound / t")
        left.set_title(f"{family}, {dtype}: fraction of the memory bound, {len(rows)} shapes", fontsize=10)
        left.legend(fontsize=8)
        right = figure.add_subplot(len(groups), 2, 2 * panel + 2)
        for baseline in BASELINES:
            values = sorted(v for r in rows if (v := r.speedup(baseline)) is not None)
            right.plot(_quantiles(len(values)), values, label=f"vs {LABELS[baseline]}")
        right.axhline(1.0, color="black", linewidth=1)
        right.set_yscale("log")
        right.set_xlabel("share of the suite's shapes")
        right.set_ylabel("their time / ours")
        right.set_title(f"{family}, {dtype}: speedup of ours, sorted", fontsize=10)
        right.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def _quantiles(n: int) -> list[float]:
    """Where n sorted values sit on [0, 1] (the middle of each's share)."""
    return [(i + 0.5) / n for i in range(n)]


# --- launch benchmark ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Measure:
    """One launch-benchmark figure: host time per launch (section "launch"), per kernel ("graph") or per load."""

    section: str  # "launch", "graph" or "load"
    name: str
    value: float | None
    unit: str
    gpu: float | None = None  # GPU time per kernel over the same loop, where it tells something
    note: str = ""  # why the value is n/a


def ratios_to_floor(rows: Sequence[Measure]) -> list[float | None]:
    """Each "launch" row against the first (the bare ctypes call); None for the other sections."""
    launches = [r for r in rows if r.section == "launch"]
    floor = launches[0].value if launches else None
    return [ratio(r.value, floor) if r.section == "launch" else None for r in rows]


def launch_csv_row(row: Measure, floor_ratio: float | None) -> dict[str, str]:
    values = (fmt(row.value, ".4f"), row.unit, fmt(row.gpu, ".4f"), fmt(floor_ratio, ".3f"), row.note)
    return dict(zip(LAUNCH_FIELDS, (row.section, row.name, *values), strict=True))


def write_launch_csv(rows: Sequence[Measure], path: Path) -> None:
    write_dicts(path, LAUNCH_FIELDS, map(launch_csv_row, rows, ratios_to_floor(rows)))


def print_launch(rows: Sequence[Measure], out: TextIO | None = None) -> None:
    out = _out(out)
    for row, floor_ratio in zip(rows, ratios_to_floor(rows), strict=True):
        line = f"  [{row.section}] {row.name:<58} {fmt(row.value, '.3f'):>9} {row.unit:<14}"
        if floor_ratio is not None:
            line += f" {floor_ratio:6.2f}x the floor"
        if row.gpu is not None:
            line += f"  (GPU {row.gpu:.3f} µs per kernel)"
        print(line + (f"  {row.note}" if row.note else ""), file=out)
    if any(row.gpu is not None for row in rows):
        print("  host times near the GPU time per kernel are limited by the GPU, not by the host", file=out)


# --- the log ---------------------------------------------------------------------------------------------------------
class Tee(io.TextIOBase):
    """A text stream writing to several others (the terminal and the log)."""

    def __init__(self, *streams: TextIO) -> None:
        self.streams = streams

    def write(self, text: str) -> int:
        for stream in self.streams:
            stream.write(text)
        return len(text)

    def flush(self) -> None:
        for stream in self.streams:
            stream.flush()


@contextlib.contextmanager
def logged(path: Path) -> Iterator[None]:
    """Within the block, what is printed also goes to `path`."""
    with path.open("w", encoding="utf-8") as log, contextlib.redirect_stdout(Tee(sys.stdout, log)):
        yield
