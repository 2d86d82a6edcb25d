"""`python -m rust_kernels bench`: how fast the BN2d backward op is next to PyTorch and next to the memory bound, and
what one launch costs on the host through each launch path.

Op benchmark. For each shape and dtype, in one process on the same tensors: our op (deterministic, the default),
our op with `deterministic=False` (partials combined with float atomics), PyTorch's `native_batch_norm_backward`
(train=False) and `torch.add(x, dy, out=dx)`, which moves the same bytes (read two tensors, write one) and so is the
practical bound. Each repetition flushes L2 (256 MB written), then queues a GPU spin (`torch.cuda._sleep`) longer
than the call's host time, so the timed region between the two CUDA events holds GPU work only; the median of the
repetitions is reported.

Launch benchmark. Host time per launch of one loaded kernel on a tiny problem, from the bare driver call through
ctypes (the floor) to our checked launch, cuda.core and CuPy; CUDA-graph replay against direct launches; and the
time to load the module from its cubin against JIT-compiling its PTX.
"""

from __future__ import annotations

import argparse
import csv
import ctypes
import math
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from rust_kernels.errors import RustKernelsError

Shape = tuple[int, int, int, int]
SHAPES: list[Shape] = [(32, 256, 56, 56), (32, 64, 112, 112), (256, 64, 28, 28), (64, 512, 28, 28),
                       (32, 1024, 14, 14), (128, 128, 56, 56), (32, 2048, 7, 7), (8, 32, 8, 8)]  # fmt: skip
TORCH_DTYPES = {"f32": "float32", "f64": "float64", "bf16": "bfloat16", "f16": "float16"}
ITEMSIZE = {"f32": 4, "f64": 8, "bf16": 2, "f16": 2}
DEFAULT_DTYPES = ["f32", "bf16"]
COLUMNS = ("ours", "ours_atomic", "torch", "bound")
COMPARED = ("ours", "ours_atomic", "torch")  # the columns set against the bound
LABELS = {"ours": "ours", "ours_atomic": "atomic", "torch": "torch", "bound": "bound"}
EPS = 1e-5
MIN_REPS = 20
WARMUP = 3  # calls before timing: module loading and any JIT stay outside the timed region
FLUSH_BYTES = 256 * 2**20  # over 4x the H200's 60 MB L2
SLEEP_US = 100.0  # the least GPU spin queued ahead of a timed call
LARGE_BYTES = 8e6  # shapes moving at least this much are held to the bound in the summary
LAUNCHES = 20_000
ROUNDS = 5
GRAPH_LAUNCHES = 100  # kernels per captured graph
GRAPH_REPLAYS = 200
LOADS = 20
# Failures that make one column of one case n/a instead of ending the run: our errors, an op without the
# `deterministic` keyword (TypeError), and PyTorch's errors (RuntimeError, e.g. a dtype it does not support).
MEASURE_ERRORS = (RustKernelsError, TypeError, RuntimeError)


# --- results and their arithmetic (pure: tested on the CPU) ---------------------------------------------------------
def ratio(numerator: float | None, denominator: float | None) -> float | None:
    return None if numerator is None or denominator is None else numerator / denominator


def moved_bytes(shape: Sequence[int], dtype: str) -> int:
    """Bytes the op must move at least: read dy and x, write dx."""
    return 3 * math.prod(shape) * ITEMSIZE[dtype]


def gbps(nbytes: int, us: float | None) -> float | None:
    return None if us is None else nbytes / (us * 1e3)


@dataclass(frozen=True)
class OpResult:
    """Median µs per column for one (shape, dtype); None where the column could not be measured."""

    shape: Shape
    dtype: str
    ours: float | None
    ours_atomic: float | None
    torch: float | None
    bound: float | None

    @property
    def nbytes(self) -> int:
        return moved_bytes(self.shape, self.dtype)

    def us(self, column: str) -> float | None:
        return getattr(self, column)

    def gbps(self, column: str) -> float | None:
        return gbps(self.nbytes, self.us(column))

    def fraction_of_bound(self, column: str = "ours") -> float | None:
        return ratio(self.bound, self.us(column))

    @property
    def speedup_vs_torch(self) -> float | None:
        return ratio(self.torch, self.ours)

    @property
    def deterministic_cost(self) -> float | None:
        return ratio(self.ours, self.ours_atomic)  # ours is deterministic (the default)


@dataclass(frozen=True)
class Summary:
    dtype: str
    median_fraction: float | None  # of the bound, over all shapes
    min_fraction_large: float | None  # of the bound, over shapes moving >= LARGE_BYTES
    median_speedup: float | None  # vs PyTorch
    min_speedup: float | None
    median_det_cost: float | None


def _known(values: Iterable[float | None]) -> list[float]:
    return [v for v in values if v is not None]


def _median(values: Iterable[float | None]) -> float | None:
    known = _known(values)
    return statistics.median(known) if known else None


def _minimum(values: Iterable[float | None]) -> float | None:
    return min(_known(values), default=None)


def summarize(results: Sequence[OpResult]) -> list[Summary]:
    """Per dtype, in the order the dtypes first appear."""
    summaries = []
    for dtype in dict.fromkeys(r.dtype for r in results):
        rows = [r for r in results if r.dtype == dtype]
        large = [r for r in rows if r.nbytes >= LARGE_BYTES]
        summaries.append(
            Summary(
                dtype,
                _median(r.fraction_of_bound() for r in rows),
                _minimum(r.fraction_of_bound() for r in large),
                _median(r.speedup_vs_torch for r in rows),
                _minimum(r.speedup_vs_torch for r in rows),
                _median(r.deterministic_cost for r in rows),
            )
        )
    return summaries


def fmt(value: float | None, spec: str = ".2f") -> str:
    return "n/a" if value is None else format(value, spec)


def times(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def shape_label(shape: Sequence[int]) -> str:
    return "x".join(map(str, shape))


# --- reporting -------------------------------------------------------------------------------------------------------
CSV_FIELDS = ["B", "C", "H", "W", "dtype", "bytes"]
CSV_FIELDS += [f"us_{c}" for c in COLUMNS] + [f"gbps_{c}" for c in COLUMNS]
CSV_FIELDS += [f"fraction_of_bound_{c}" for c in COMPARED] + ["speedup_vs_torch", "deterministic_cost"]


def csv_row(r: OpResult) -> dict[str, str]:
    row = dict(zip("BCHW", map(str, r.shape), strict=True)) | {"dtype": r.dtype, "bytes": str(r.nbytes)}
    row |= {f"us_{c}": fmt(r.us(c), ".3f") for c in COLUMNS}
    row |= {f"gbps_{c}": fmt(r.gbps(c), ".1f") for c in COLUMNS}
    row |= {f"fraction_of_bound_{c}": fmt(r.fraction_of_bound(c), ".4f") for c in COMPARED}
    return row | {
        "speedup_vs_torch": fmt(r.speedup_vs_torch, ".4f"),
        "deterministic_cost": fmt(r.deterministic_cost, ".4f"),
    }


def write_csv(results: Sequence[OpResult], path: Path) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, CSV_FIELDS)
        writer.writeheader()
        writer.writerows(csv_row(r) for r in results)


def print_table(results: Sequence[OpResult], out: Any = sys.stdout) -> None:
    head = f"{'shape (B,C,H,W)':<18} {'dtype':<5} {'MB':>7}"
    head += "".join(f" {LABELS[c] + ' µs':>10}" for c in COLUMNS) + "".join(
        f" {LABELS[c] + ' GB/s':>10}" for c in COLUMNS
    )
    head += "".join(f" {LABELS[c] + '/bd':>9}" for c in COMPARED) + f" {'vs torch':>8} {'det cost':>8}"
    print(head, file=out)
    for r in results:
        line = f"{shape_label(r.shape):<18} {r.dtype:<5} {r.nbytes / 1e6:>7.2f}"
        line += "".join(f" {fmt(r.us(c), '.1f'):>10}" for c in COLUMNS)
        line += "".join(f" {fmt(r.gbps(c), '.0f'):>10}" for c in COLUMNS)
        line += "".join(f" {fmt(r.fraction_of_bound(c), '.3f'):>9}" for c in COMPARED)
        print(line + f" {fmt(r.speedup_vs_torch):>8} {fmt(r.deterministic_cost):>8}", file=out)


def print_summary(summaries: Sequence[Summary], out: Any = sys.stdout) -> None:
    for s in summaries:
        print(
            f"{s.dtype}: fraction of bound median {fmt(s.median_fraction, '.3f')}, "
            f"min over shapes moving >= {LARGE_BYTES / 1e6:.0f} MB {fmt(s.min_fraction_large, '.3f')}; "
            f"speedup vs torch median {times(s.median_speedup)}, min {times(s.min_speedup)}; "
            f"deterministic cost median {times(s.median_det_cost)}",
            file=out,
        )


def write_png(results: Sequence[OpResult], path: Path) -> None:
    """Fraction of the bound per shape: one panel per dtype, bars for ours, ours-atomic and torch."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    dtypes = list(dict.fromkeys(r.dtype for r in results))
    figure = Figure(figsize=(12, 3.6 * len(dtypes)))
    FigureCanvasAgg(figure)
    width = 0.8 / len(COMPARED)
    for panel, dtype in enumerate(dtypes, 1):
        rows = [r for r in results if r.dtype == dtype]
        axes = figure.add_subplot(len(dtypes), 1, panel)
        for index, column in enumerate(COMPARED):
            heights = [r.fraction_of_bound(column) for r in rows]
            positions = [i + (index - (len(COMPARED) - 1) / 2) * width for i in range(len(rows))]
            axes.bar(positions, [math.nan if h is None else h for h in heights], width, label=column)
        axes.axhline(1.0, color="black", linewidth=1, label="bound")
        axes.axhline(0.95, color="red", linestyle="--", linewidth=1, label="0.95 of bound")
        axes.set_xticks(range(len(rows)), [shape_label(r.shape) for r in rows], fontsize=8)
        axes.set_ylabel("t_bound / t")
        axes.set_title(f"BN2d backward, {dtype}: fraction of the memory bound (torch.add, same bytes)")
        axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    figure.tight_layout()
    figure.savefig(path, dpi=120)


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


def write_launch_csv(rows: Sequence[Measure], path: Path) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["section", "name", "value", "unit", "gpu_us_per_kernel", "ratio_to_floor", "note"])
        for row, floor_ratio in zip(rows, ratios_to_floor(rows), strict=True):
            values = (fmt(row.value, ".4f"), row.unit, fmt(row.gpu, ".4f"), fmt(floor_ratio, ".3f"))
            writer.writerow([row.section, row.name, *values, row.note])


def print_launch(rows: Sequence[Measure], out: Any = sys.stdout) -> None:
    for row, floor_ratio in zip(rows, ratios_to_floor(rows), strict=True):
        line = f"  [{row.section}] {row.name:<58} {fmt(row.value, '.3f'):>9} {row.unit:<14}"
        if floor_ratio is not None:
            line += f" {floor_ratio:6.2f}x the floor"
        if row.gpu is not None:
            line += f"  (GPU {row.gpu:.3f} µs per kernel)"
        print(line + (f"  {row.note}" if row.note else ""), file=out)
    if any(row.gpu is not None for row in rows):
        print("  host times near the GPU time per kernel are limited by the GPU, not by the host", file=out)


# --- GPU timing ------------------------------------------------------------------------------------------------------
class OpTimer:
    """Times single calls with CUDA events, L2 flushed and the GPU kept busy ahead of the call."""

    def __init__(self, torch: Any, reps: int) -> None:
        self.torch = torch
        self.reps = reps
        self.flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)
        self.cycles_per_us = self._calibrate()

    def _calibrate(self) -> float:
        """Clock cycles of `torch.cuda._sleep` per µs, measured once."""
        cycles = 1_000_000
        self.torch.cuda._sleep(cycles)
        self.start.record()
        self.torch.cuda._sleep(cycles)
        self.end.record()
        self.end.synchronize()
        return cycles / (self.start.elapsed_time(self.end) * 1e3)

    def _host_us(self, call: Callable[[], Any]) -> float:
        self.torch.cuda.synchronize()
        begin = time.perf_counter()
        call()
        return (time.perf_counter() - begin) * 1e6

    def median_us(self, call: Callable[[], Any]) -> float:
        for _ in range(WARMUP):
            call()
        # The spin must outlast enqueueing the start event and the call, or host time leaks into the measurement.
        cycles = int(max(SLEEP_US, 2 * self._host_us(call)) * self.cycles_per_us)
        times = []
        for _ in range(self.reps):
            self.flush.zero_()
            self.torch.cuda._sleep(cycles)
            self.start.record()
            call()
            self.end.record()
            self.end.synchronize()
            times.append(self.start.elapsed_time(self.end) * 1e3)
        return statistics.median(times)


def op_calls(torch: Any, shape: Shape, dtype: str) -> dict[str, Callable[[], Any]]:
    """The four timed calls on one set of random tensors."""
    from rust_kernels import ops

    kind = getattr(torch, TORCH_DTYPES[dtype])
    generator = torch.Generator(device="cuda").manual_seed(0)
    channels = shape[1]

    def randn(*size: int) -> Any:
        return torch.randn(size, generator=generator, device="cuda", dtype=kind)

    dy, x, weight, mean = randn(*shape), randn(*shape), randn(channels), randn(channels)
    var = torch.rand(channels, generator=generator, device="cuda", dtype=kind) + 0.5
    dx = torch.empty_like(x)
    # 0-element save_mean/save_invstd; PyTorch wants them in float32 for bf16/f16 inputs (its accumulation type).
    empty = torch.empty(0, device="cuda", dtype=torch.float64 if dtype == "f64" else torch.float32)
    native = torch.ops.aten.native_batch_norm_backward
    return {
        "ours": lambda: ops.batch_norm_2d_nchw_backward(dy, x, weight, mean, var, eps=EPS),
        "ours_atomic": lambda: ops.batch_norm_2d_nchw_backward(dy, x, weight, mean, var, eps=EPS, deterministic=False),
        "torch": lambda: native(dy, x, weight, mean, var, empty, empty, False, EPS, [True, True, True]),
        "bound": lambda: torch.add(x, dy, out=dx),
    }


def run_ops(torch: Any, dtypes: Sequence[str], reps: int, shapes: Sequence[Shape] = SHAPES) -> list[OpResult]:
    timer = OpTimer(torch, reps)
    print(f"op benchmark: {len(shapes)} shapes x {list(dtypes)}, median of {reps} (L2 flushed)", flush=True)
    results = []
    for number, (dtype, shape) in enumerate(((d, s) for d in dtypes for s in shapes), 1):
        times: dict[str, float | None] = {}
        for column, call in op_calls(torch, shape, dtype).items():
            try:
                times[column] = timer.median_us(call)
            except MEASURE_ERRORS as err:
                times[column] = None
                print(f"  {column} n/a for {shape_label(shape)} {dtype}: {type(err).__name__}: {err}", flush=True)
        result = OpResult(shape, dtype, **times)
        results.append(result)
        columns = ", ".join(f"{c} {fmt(result.us(c), '.1f')}" for c in COLUMNS)
        print(f"[{number}/{len(shapes) * len(dtypes)}] {shape_label(shape)} {dtype}: {columns} µs", flush=True)
    return results


# --- launch overhead -------------------------------------------------------------------------------------------------
NUMPY_SCALARS = {
    "i32": np.int32,
    "u32": np.uint32,
    "i64": np.int64,
    "u64": np.uint64,
    "f32": np.float32,
    "f64": np.float64,
}


class TinyLaunch:
    """One loaded kernel and one checked, packed set of arguments for a problem small enough for the GPU to keep
    pace with the host, shared by every launch path."""

    def __init__(self, torch: Any) -> None:
        import rust_kernels
        from rust_kernels import args as kargs
        from rust_kernels.cuda import CTYPES
        from rust_kernels.kernels import BatchNorm2dNchwBackward  # type: ignore[attr-defined]

        self.kernel = BatchNorm2dNchwBackward(block_hw=256, dtype="f32")
        self.loaded = rust_kernels.load(self.kernel)
        batches, channels, hw = 1, 1, 32
        dy, x, dx = (torch.randn(batches * channels * hw, device="cuda") for _ in range(3))
        weight, mean, var, dweight, dbias = (torch.rand(channels, device="cuda") + 0.5 for _ in range(5))
        self.args = [dy, x, dx, weight, mean, var, dweight, dbias, batches, channels, hw, EPS]
        self.packed = kargs.pack(self.kernel, self.args, "cuda")
        self.grid, self.block, self.shared = kargs.launch_config(
            self.kernel, (channels,), self.kernel.block_dim, self.packed, None
        )
        self._values = [CTYPES[p.type](p.value) for p in self.packed]  # the driver reads these at each launch
        self.params = (ctypes.c_void_p * len(self._values))(*(ctypes.addressof(v) for v in self._values))

    def launcher_args(self, pointer: Callable[[Any, int], Any]) -> tuple[Any, ...]:
        """The arguments for a third-party launcher: `pointer(array, address)` for pointers, NumPy scalars else."""
        return tuple(
            pointer(a, int(p.value)) if p.type == "ptr" else NUMPY_SCALARS[p.type](p.value)
            for a, p in zip(self.args, self.packed, strict=True)
        )

    def image(self) -> tuple[Path, bool]:
        """The cached cubin for this device if there is one (True), else the PTX (False)."""
        from rust_kernels.builder import cached_entry
        from rust_kernels.cuda import compute_capability

        entry = cached_entry(self.kernel)
        major, minor = compute_capability(self.loaded.device)
        cubin = entry.file(f"kernel.sm_{major}{minor}.cubin")
        return (cubin, True) if cubin.is_file() else (entry.file("kernel.ptx"), False)


Loop = Callable[[int], None]


def _expect_success(code: Any, what: str) -> None:
    """Raises unless `code`, a CUresult (enum from cuda.bindings, int from ctypes), is CUDA_SUCCESS."""
    value = int(getattr(code, "value", code))
    if value:
        raise RuntimeError(f"{what} failed with CUresult {value}")


def ctypes_loop(t: TinyLaunch) -> Loop:
    launch = ctypes.CDLL("libcuda.so.1").cuLaunchKernel  # its own function object: argtypes set here only
    launch.restype = ctypes.c_int
    launch.argtypes = [ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    dims = (ctypes.c_uint(d) for d in (*t.grid, *t.block, t.shared))
    handle, params = ctypes.c_void_p(int(t.loaded.function)), ctypes.cast(t.params, ctypes.c_void_p)
    argv = (handle, *dims, ctypes.c_void_p(0), params, ctypes.c_void_p(None))  # stream 0: the legacy default stream
    _expect_success(launch(*argv), "ctypes cuLaunchKernel")

    def loop(n: int) -> None:
        for _ in range(n):
            launch(*argv)

    return loop


def bindings_loop(t: TinyLaunch) -> Loop:
    from cuda.bindings.driver import cuLaunchKernel

    function, shared, params = t.loaded.function, t.shared, ctypes.addressof(t.params)
    (gx, gy, gz), (bx, by, bz) = t.grid, t.block
    _expect_success(cuLaunchKernel(function, gx, gy, gz, bx, by, bz, shared, 0, params, 0)[0], "cuLaunchKernel")

    def loop(n: int) -> None:
        for _ in range(n):
            cuLaunchKernel(function, gx, gy, gz, bx, by, bz, shared, 0, params, 0)

    return loop


def prepared_loop(t: TinyLaunch) -> Loop:
    prepared = t.loaded.prepare(t.grid, t.block, t.args)

    def loop(n: int) -> None:
        for _ in range(n):
            prepared()

    return loop


def checked_loop(t: TinyLaunch) -> Loop:
    launch, grid, block, args = t.loaded.launch, t.grid, t.block, t.args

    def loop(n: int) -> None:
        for _ in range(n):
            launch(grid, block, args)

    return loop


def cuda_core_loop(t: TinyLaunch) -> Loop:
    from cuda.core import LEGACY_DEFAULT_STREAM, Device, LaunchConfig, ObjectCode, launch

    device = Device(t.loaded.device)
    device.set_current()
    path, is_cubin = t.image()
    code = ObjectCode.from_cubin(path.read_bytes()) if is_cubin else ObjectCode.from_ptx(path.read_bytes())
    kernel = code.get_kernel(t.kernel.entry_point_name())
    config = LaunchConfig(grid=t.grid, block=t.block, shmem_size=t.shared)
    stream = LEGACY_DEFAULT_STREAM  # as for every other path here
    args = t.launcher_args(lambda _, address: address)  # a Python int is taken as a pointer
    launch(stream, config, kernel, *args)

    def loop(n: int) -> None:
        for _ in range(n):
            launch(stream, config, kernel, *args)

    return loop


def cupy_loop(t: TinyLaunch) -> Loop:
    import cupy

    path, _ = t.image()
    function = cupy.RawModule(path=str(path)).get_function(t.kernel.entry_point_name())
    grid, block, shared = t.grid, t.block, t.shared
    args = t.launcher_args(lambda array, _: cupy.asarray(array))  # zero-copy views of the same torch tensors
    function(grid, block, args, shared_mem=shared)

    def loop(n: int) -> None:
        for _ in range(n):
            function(grid, block, args, shared_mem=shared)

    return loop


LAUNCH_PATHS: list[tuple[str, Callable[[TinyLaunch], Loop]]] = [
    ("ctypes cuLaunchKernel (prebuilt params)", ctypes_loop),
    ("cuda.bindings cuLaunchKernel (prebuilt params)", bindings_loop),
    ("rust_kernels prepared", prepared_loop),
    ("rust_kernels launch (checked)", checked_loop),
    ("cuda.core launch", cuda_core_loop),
    ("CuPy RawModule", cupy_loop),
]


def time_loop(torch: Any, loop: Loop, n: int, rounds: int = ROUNDS) -> tuple[float, float]:
    """Median over rounds of (host µs, GPU µs) per iteration of `loop(n)`, on the current stream."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    loop(min(n, 1000))  # settle caches and allocations before the first round
    host, gpu = [], []
    for _ in range(rounds):
        torch.cuda.synchronize()
        start.record()
        begin = time.perf_counter()
        loop(n)
        host.append((time.perf_counter() - begin) * 1e6 / n)
        end.record()
        end.synchronize()
        gpu.append(start.elapsed_time(end) * 1e3 / n)
    return statistics.median(host), statistics.median(gpu)


def guarded(section: str, name: str, unit: str, measure: Callable[[], list[Measure]]) -> list[Measure]:
    """The rows of `measure`, or one n/a row saying why: a missing or incompatible third-party library, or a
    failure in one section, must not end the run or lose the other sections."""
    try:
        return measure()
    except Exception as err:
        return [Measure(section, name, None, unit, note=f"{type(err).__name__}: {err}")]


def launch_row(torch: Any, t: TinyLaunch, name: str, make: Callable[[TinyLaunch], Loop]) -> list[Measure]:
    return [Measure("launch", name, time_loop(torch, make(t), LAUNCHES)[0], "µs/launch")]


def launch_rows(torch: Any, t: TinyLaunch) -> list[Measure]:
    rows = []
    for name, make in LAUNCH_PATHS:
        rows += guarded("launch", name, "µs/launch", partial(launch_row, torch, t, name, make))
        print(f"  {name}: {fmt(rows[-1].value, '.3f')} µs per launch {rows[-1].note}", flush=True)
    return rows


def graph_rows(torch: Any, t: TinyLaunch) -> list[Measure]:
    """Host (and GPU) time per kernel: a captured graph of GRAPH_LAUNCHES prepared launches, replayed, against the
    same launches made directly, both on one side stream."""
    stream = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        captured = t.loaded.prepare(t.grid, t.block, t.args, stream=torch.cuda.current_stream())
        for _ in range(GRAPH_LAUNCHES):
            captured()
    direct = t.loaded.prepare(t.grid, t.block, t.args, stream=stream)

    def replays(n: int) -> None:
        for _ in range(n):
            graph.replay()

    def launches(n: int) -> None:
        for _ in range(n):
            direct()

    with torch.cuda.stream(stream):
        replay_host, replay_gpu = time_loop(torch, replays, GRAPH_REPLAYS)
        direct_host, direct_gpu = time_loop(torch, launches, GRAPH_REPLAYS * GRAPH_LAUNCHES)
    per = GRAPH_LAUNCHES
    return [
        Measure("graph", "direct prepared launches (side stream)", direct_host, "µs/kernel", direct_gpu),
        Measure(
            "graph", f"CUDA graph replay ({per} launches per graph)", replay_host / per, "µs/kernel", replay_gpu / per
        ),
    ]


def _median_ms(action: Callable[[int], Any], count: int = LOADS) -> float:
    times = []
    for index in range(count):
        begin = time.perf_counter()
        action(index)
        times.append((time.perf_counter() - begin) * 1e3)
    return statistics.median(times)


def load_rows(t: TinyLaunch) -> list[Measure]:
    """Median ms to load the kernel: our CudaKernel (cache lookup + cubin), the bare cubin load, and the PTX."""
    from cuda.bindings import driver

    from rust_kernels.builder import cached_entry
    from rust_kernels.cuda import CudaKernel

    modules = []
    ptx = cached_entry(t.kernel).file("kernel.ptx").read_bytes()
    path, is_cubin = t.image()

    def ours(_: int) -> None:
        modules.append(CudaKernel(t.kernel, t.loaded.device).module)

    def load(image: bytes) -> None:
        err, module = driver.cuModuleLoadData(image)
        _expect_success(err, "cuModuleLoadData")
        modules.append(module)

    def raw_image(_: int) -> None:
        load(path.read_bytes())

    def raw_ptx(index: int) -> None:
        load(ptx + f"\n// load {index}\n".encode() + b"\0")  # a distinct comment per load defeats the JIT cache

    image_kind = "cubin" if is_cubin else "PTX: no cubin for this device"
    rows = [
        Measure("load", f"rust_kernels CudaKernel(k) ({image_kind}, with cache lookup)", _median_ms(ours), "ms"),
        Measure("load", f"cuModuleLoadData ({image_kind})", _median_ms(raw_image), "ms"),
        Measure("load", "cuModuleLoadData (PTX, driver JIT, uncached)", _median_ms(raw_ptx), "ms"),
    ]
    for module in modules:
        _expect_success(driver.cuModuleUnload(module)[0], "cuModuleUnload")
    return rows


def run_launch(torch: Any) -> list[Measure]:
    print(f"launch benchmark: host time per launch, median of {ROUNDS} rounds of {LAUNCHES}", flush=True)
    tiny = TinyLaunch(torch)
    rows = launch_rows(torch, tiny)
    print(f"  CUDA graph: {GRAPH_REPLAYS} replays of {GRAPH_LAUNCHES} prepared launches", flush=True)
    rows += guarded("graph", "CUDA graph replay", "µs/kernel", lambda: graph_rows(torch, tiny))
    print(f"  module load: median of {LOADS}", flush=True)
    return rows + guarded("load", "module load", "ms", lambda: load_rows(tiny))


# --- command line ----------------------------------------------------------------------------------------------------
def _reps(text: str) -> int:
    value = int(text)
    if value < MIN_REPS:
        raise argparse.ArgumentTypeError(f"at least {MIN_REPS} repetitions, got {value}")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m rust_kernels bench",
        description="Time the BN2d backward op against PyTorch and the memory bound, and the cost of a launch.",
    )
    p.add_argument("--dtype", nargs="+", choices=list(TORCH_DTYPES), default=DEFAULT_DTYPES, help="dtypes to time")
    p.add_argument("--reps", type=_reps, default=30, help=f"timed repetitions per call (at least {MIN_REPS})")
    p.add_argument("--out", type=Path, default=Path("."), help="directory for bench.csv, bench.png and launch.csv")
    p.add_argument(
        "--launch", action=argparse.BooleanOptionalAction, default=True, help="also run the launch-overhead benchmark"
    )
    return p


def unavailable() -> str | None:
    """Why the benchmark cannot run here, or None."""
    from rust_kernels.cuda import gpu_available

    ok, why = gpu_available()
    if not ok:
        return f"no GPU: {why}"
    try:
        import torch
    except ImportError as err:
        return f"PyTorch is not installed ({err}); it provides the tensors, the baseline and the timer"
    if not torch.cuda.is_available():
        return "PyTorch sees no CUDA device"
    return None


def main(argv: list[str] | None = None) -> int:
    options = parser().parse_args(argv)
    why = unavailable()
    if why is not None:
        print(f"bench: cannot run: {why}", flush=True)
        return 2
    import torch

    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    options.out.mkdir(parents=True, exist_ok=True)
    results = run_ops(torch, options.dtype, options.reps)
    print_table(results)
    print_summary(summarize(results))
    write_csv(results, options.out / "bench.csv")
    print(f"wrote {options.out / 'bench.csv'}", flush=True)
    try:
        write_png(results, options.out / "bench.png")
        print(f"wrote {options.out / 'bench.png'}", flush=True)
    except ImportError as err:
        print(f"bench.png not written: matplotlib is missing ({err})", flush=True)
    if options.launch:
        rows = run_launch(torch)
        print_launch(rows)
        write_launch_csv(rows, options.out / "launch.csv")
        print(f"wrote {options.out / 'launch.csv'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
