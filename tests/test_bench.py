"""The benchmark on the CPU: its arithmetic, summaries, CSV files, tables, PNG, log and command line, and its timers
and measurement loops driven by a simulated GPU clock and fake callables. One GPU test runs it for real."""

from __future__ import annotations

import csv
import io
import math
import sys
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rust_kernels import bench, driver
from rust_kernels.bench import baselines, launch, ops, report, suite, timing
from rust_kernels.bench.report import HostResult, Measure, OpResult

BWD = "batch_norm_2d_nchw_backward"
FWD = "batch_norm_2d_nchw_forward_inference"
LARGE = (32, 256, 56, 56)  # moves 308 MB in f32 (backward)
SMALL = (8, 32, 8, 8)  # moves 197 kB in f32 (backward)


def op(shape=LARGE, dtype="f32", family=BWD, nbytes=None, **us: float | None) -> OpResult:
    """A backward result (ours, atomic, torch, compile, bound: 100, 125, 150, 120, 90 µs) with `us` overriding."""
    times = {"ours": 100.0, "ours_atomic": 125.0, "torch": 150.0, "compile": 120.0, "bound": 90.0} | us
    return OpResult(family, shape, dtype, times, 3 * int(np.prod(shape)) * 4 if nbytes is None else nbytes)


def forward(shape=LARGE, dtype="f32", **us: float | None) -> OpResult:
    times = {"ours": 50.0, "torch": 80.0, "compile": 60.0, "bound": 45.0} | us
    return OpResult(FWD, shape, dtype, times, 2 * int(np.prod(shape)) * 4)


# --- a simulated GPU: a clock that kernels, spins and events share ---------------------------------------------------
class FakeGpu:
    """Just enough of `torch` for the timers: events stamp a simulated GPU clock, which `_sleep` and the fake calls
    advance; `zero_` of the flush buffer is counted."""

    CYCLES_PER_US = 1500.0

    def __init__(self) -> None:
        self.clock_us = 0.0
        self.flushes = 0
        self.sleeps: list[int] = []
        self.syncs = 0
        self.resets = 0
        self.float32 = "float32"
        gpu = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                assert enable_timing
                self.at: float | None = None

            def record(self) -> None:
                self.at = gpu.clock_us

            def synchronize(self) -> None:
                pass

            def elapsed_time(self, end: Event) -> float:
                return (end.at - self.at) / 1e3  # ms, as PyTorch's

        class Buffer:
            def zero_(self) -> None:
                gpu.flushes += 1
                gpu.clock_us += 30.0  # writing 256 MB takes GPU time, outside the timed span

        self._buffer = Buffer
        self.cuda = types.SimpleNamespace(
            Event=Event, _sleep=self._sleep, synchronize=self._synchronize, get_device_name=lambda: "Fake GPU"
        )
        self._dynamo = types.SimpleNamespace(reset=self._reset)
        self.__version__ = "0.fake"

    def _sleep(self, cycles: int) -> None:
        self.sleeps.append(cycles)
        self.clock_us += cycles / self.CYCLES_PER_US

    def _synchronize(self) -> None:
        self.syncs += 1

    def _reset(self) -> None:
        self.resets += 1

    def empty(self, n: int, dtype: Any = None, device: str = "") -> Any:
        assert n * 4 == timing.FLUSH_BYTES and device == "cuda"
        return self._buffer()

    def kernel(self, us: float) -> Callable[[], None]:
        """A call that runs `us` on the GPU."""

        def call() -> None:
            self.clock_us += us

        return call


def fails(err: Exception) -> Callable[[], None]:
    def call() -> None:
        raise err

    return call


# --- timing ----------------------------------------------------------------------------------------------------------
class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_host_us_interleaved_times_every_call_in_each_round_and_syncs_only_at_round_ends():
    clock, order, syncs = FakeClock(), [], []

    def call(name: str, us: float):
        def run() -> None:
            order.append(name)
            clock.now += (us if len(order) % 7 else us + 7) * 1e-6  # an occasional slow call, whoever makes it

        return run

    calls = {"ours": call("ours", 2.0), "torch": call("torch", 4.0)}
    us = timing.host_us_interleaved(calls, per_round=10, rounds=3, sync=lambda: syncs.append(len(order)), clock=clock)
    assert order == (["ours"] * 10 + ["torch"] * 10) * 3  # interleaved: each round times every call
    assert syncs == [0, 10, 20, 30, 40, 50, 60]  # before the first round and after each timed span, never inside
    per_round = timing.host_rounds(timing.repeat(lambda: None), 1, 1, clock=clock)  # the clock does not move
    assert per_round == [0.0]
    assert us == {"ours": pytest.approx(3.4), "torch": pytest.approx(4.7)}  # rounds of 2.7, 3.4, 3.4 and 4.7 µs x3


def test_host_rounds_runs_begin_and_end_outside_the_timed_span():
    clock, order = FakeClock(), []

    def begin() -> None:
        order.append("begin")
        clock.now += 1.0  # a slow synchronisation must not be charged to the loop

    def end() -> None:
        order.append("end")
        clock.now += 1.0

    def loop(n: int) -> None:
        order.append(f"loop {n}")
        clock.now += n * 1e-6

    assert timing.host_rounds(loop, 4, 2, begin, end, clock) == pytest.approx([1.0, 1.0])
    assert order == ["begin", "loop 4", "end"] * 2
    with pytest.raises(ValueError):
        timing.host_rounds(loop, 0, 1)


def test_gpu_timer_measures_the_call_only():
    gpu = FakeGpu()
    timer = timing.GpuTimer(gpu, reps=21)
    assert timer.cycles_per_us == pytest.approx(FakeGpu.CYCLES_PER_US)
    flushes = gpu.flushes
    assert timer.median_us(gpu.kernel(7.0)) == pytest.approx(7.0)  # not the flush, not the spin
    assert gpu.flushes - flushes == 21  # L2 flushed before each repetition
    spins = gpu.sleeps[-21:]
    assert len(set(spins)) == 1 and spins[0] >= timing.SLEEP_US * FakeGpu.CYCLES_PER_US


def test_gpu_timer_interleaves_calls_so_a_change_of_the_gpus_speed_falls_on_each_alike():
    gpu, order = FakeGpu(), []

    def kernel(name: str) -> Callable[[], None]:
        def call() -> None:
            order.append(name)
            gpu.clock_us += 9.0 if len(order) > 30 else 10.0  # the GPU speeds up midway

        return call

    timer = timing.GpuTimer(gpu, reps=21)
    us = timer.medians_us({"ours": kernel("ours"), "copy": kernel("copy")})
    assert order[-42:] == ["ours", "copy"] * 21  # each repetition times every call in turn
    assert us == {"ours": 10.0, "copy": 10.0}
    order.clear()  # the same calls timed one after the other: the later one gains the speed-up alone
    assert (timer.median_us(kernel("ours")), timer.median_us(kernel("copy"))) == (10.0, 9.0)


def test_host_and_gpu_us_per_iteration():
    gpu = FakeGpu()

    def loop(n: int) -> None:
        gpu.clock_us += 3.0 * n

    host, per_kernel = timing.host_and_gpu_us(gpu, loop, 500, rounds=3)
    assert per_kernel == pytest.approx(3.0)
    assert host >= 0.0 and gpu.syncs == 3


# --- results and their arithmetic ------------------------------------------------------------------------------------
def test_bandwidth_fraction_of_bound_and_speedups():
    r = op(shape=(1, 1, 10, 100), ours=10.0)
    assert r.nbytes == 3 * 1000 * 4
    assert r.gbps("ours") == pytest.approx(12000 / 10e-6 / 1e9)
    r = op()
    assert r.fraction_of_bound() == pytest.approx(0.9)
    assert r.fraction_of_bound("torch") == pytest.approx(0.6)
    assert r.speedup("torch") == pytest.approx(1.5)
    assert r.speedup("compile") == pytest.approx(1.2)
    assert r.deterministic_cost == pytest.approx(0.8)
    assert r.columns() == ["ours", "ours_atomic", "torch", "compile", "bound"]


def test_a_failed_or_absent_column_gives_none_not_an_error():
    r = op(ours_atomic=None, torch=None)
    assert r.gbps("ours_atomic") is None and r.fraction_of_bound("ours_atomic") is None
    assert r.speedup("torch") is None and r.deterministic_cost is None
    assert r.fraction_of_bound() == pytest.approx(0.9)
    f = forward()
    assert f.columns() == ["ours", "torch", "compile", "bound"]
    assert f.deterministic_cost is None and f.speedup("compile") == pytest.approx(1.2)


def test_host_ratio():
    h = HostResult(BWD, SMALL, "f32", {"ours": 12.0, "torch": 30.0, "bound": 5.0})
    assert h.ours_over_torch == pytest.approx(0.4)
    assert HostResult(BWD, SMALL, "f32", {"ours": 12.0, "torch": None}).ours_over_torch is None


def test_summary_per_family_and_dtype():
    results = [
        op(LARGE, "f32", ours=100.0, bound=90.0, torch=200.0, compile=150.0),  # 0.90 of bound, 2.0x, 1.5x
        op((32, 2048, 7, 7), "f32", ours=100.0, bound=98.0, torch=100.0, compile=90.0),  # 0.98, 1.0x, 0.9x
        op(SMALL, "f32", ours=100.0, bound=50.0, torch=300.0, compile=300.0),  # 0.50 (too small for the min), 3x
        op(LARGE, "bf16", ours=50.0, bound=49.0, torch=None, ours_atomic=None, compile=None),
        forward(LARGE, "f32"),
    ]
    hosts = [HostResult(BWD, SMALL, "f32", {"ours": 10.0, "torch": 25.0})]
    f32, bf16, fwd = report.summarize(results, hosts)
    assert (f32.family, f32.dtype) == (BWD, "f32")
    assert f32.median_fraction == pytest.approx(0.90)
    assert f32.min_fraction_large == pytest.approx(0.90)
    assert (f32.median_vs_torch, f32.min_vs_torch) == (pytest.approx(2.0), pytest.approx(1.0))
    assert (f32.median_vs_compile, f32.min_vs_compile) == (pytest.approx(1.5), pytest.approx(0.9))
    assert f32.median_det_cost == pytest.approx(0.8)
    assert f32.host_ours_over_torch == pytest.approx(0.4)
    assert bf16.median_fraction == pytest.approx(0.98)
    assert bf16.median_vs_torch is None and bf16.min_vs_compile is None and bf16.median_det_cost is None
    assert bf16.host_ours_over_torch is None
    assert (fwd.family, fwd.median_det_cost, fwd.median_fraction) == (FWD, None, pytest.approx(0.9))


def test_summary_of_small_shapes_only_has_no_large_minimum():
    (summary,) = report.summarize([op(SMALL)])
    assert summary.min_fraction_large is None
    assert summary.median_fraction == pytest.approx(0.9)


# --- CSV -------------------------------------------------------------------------------------------------------------
def test_bench_csv(tmp_path):
    path = tmp_path / "bench.csv"
    report.write_csv([op(), op(SMALL, "bf16", ours_atomic=None), forward()], path)
    rows = list(csv.DictReader(path.open()))
    assert list(rows[0]) == report.BENCH_FIELDS
    assert (rows[0]["family"], rows[0]["shape"], rows[0]["dtype"]) == (BWD, "32x256x56x56", "f32")
    assert rows[0]["bytes"] == str(3 * 32 * 256 * 56 * 56 * 4)
    assert float(rows[0]["us_ours"]) == 100.0
    assert float(rows[0]["fraction_of_bound_ours"]) == pytest.approx(0.9)
    assert float(rows[0]["speedup_vs_torch"]) == pytest.approx(1.5)
    assert float(rows[0]["speedup_vs_compile"]) == pytest.approx(1.2)
    assert float(rows[0]["gbps_bound"]) == pytest.approx(op().nbytes / 90e3, rel=1e-3)
    assert rows[1]["us_ours_atomic"] == rows[1]["deterministic_cost"] == "n/a"  # failed
    assert rows[2]["us_ours_atomic"] == rows[2]["deterministic_cost"] == ""  # the family has no such column
    assert rows[2]["family"] == FWD and float(rows[2]["speedup_vs_torch"]) == pytest.approx(1.6)


def test_suite_csv_has_the_issue_columns(tmp_path):
    path = tmp_path / "bench_suite.csv"
    report.write_suite_csv([op(), forward()], path)
    rows = list(csv.DictReader(path.open()))
    assert list(rows[0]) == report.SUITE_FIELDS
    assert (rows[0]["op"], rows[0]["shape"], rows[0]["dtype"]) == (BWD, "32x256x56x56", "f32")
    assert float(rows[0]["ours_us"]) == 100.0 and float(rows[0]["bound_us"]) == 90.0
    assert float(rows[0]["fraction_of_bound"]) == pytest.approx(0.9)
    assert float(rows[0]["vs_torch"]) == pytest.approx(1.5) and float(rows[0]["vs_compile"]) == pytest.approx(1.2)


def test_the_shape_suite_covers_the_models_and_the_extremes():
    shapes, sources = suite.shapes("batch_norm_2d"), suite.sources("batch_norm_2d")
    assert len(shapes) >= 60 and len(set(shapes)) == len(shapes) and all(len(s) == 4 for s in shapes)
    models = {src.split("@")[0] for srcs in sources.values() for src in srcs if "@" in src}
    assert models == {"resnet50", "resnext50_32x4d", "mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0",
                      "densenet121", "inception_v3", "regnet_y_400mf"}  # fmt: skip
    assert {b for b, *_ in shapes} >= {1, 32, 128, 1024}
    assert (32, 2048, 7, 7) in shapes and (128, 64, 112, 112) in shapes  # resnet50: its last at 32, first at 128
    assert any(h * w == 1 and c == 4096 for _, c, h, w in shapes)
    assert any(c == 1 for _, c, _, _ in shapes) and (1, 64, 1024, 1024) in shapes
    assert any(h == w == 2 and c == 2560 for _, c, h, w in shapes)


def test_bench_suite_times_each_family_over_its_suite(monkeypatch, tmp_path):
    picked = {}

    def run(torch, families, dtypes, reps, shapes, host_calls, compile_every, deadline):
        picked.update({f.name: shapes for f in families})
        assert compile_every == 5 and deadline == math.inf  # no --budget: no limit
        return ops.Run()

    monkeypatch.setattr(bench, "unavailable", lambda: None)
    monkeypatch.setitem(sys.modules, "torch", FakeGpu())
    monkeypatch.setattr(ops, "run", run)
    assert bench.main(["--suite", "--compile-every", "5", "--skip-launch", "--out", str(tmp_path)]) == 0
    with_suite = {b.name for b in baselines.baselines() if b.suite}
    assert set(picked) == with_suite and "rms_norm_forward" not in with_suite
    assert all(shapes == suite.shapes("batch_norm_2d") for shapes in picked.values())
    assert (tmp_path / "bench_suite.csv").read_text().splitlines() == [",".join(report.SUITE_FIELDS)]
    with pytest.raises(FileNotFoundError, match="no shape suite 'nope'"):
        suite.shapes("nope")


def test_bench_compile_every_reaches_a_run_without_suite(monkeypatch, tmp_path):
    seen = []

    def run(torch, families, dtypes, reps, shapes, host_calls, compile_every, deadline):
        seen.append(compile_every)
        return ops.Run()

    monkeypatch.setattr(bench, "unavailable", lambda: None)
    monkeypatch.setitem(sys.modules, "torch", FakeGpu())
    monkeypatch.setattr(ops, "run", run)
    for k in ("0", "3"):
        assert bench.main(["--family", "batch_norm_2d_training", "--compile-every", k, "--skip-launch",
                           "--out", str(tmp_path)]) == 0  # fmt: skip
    assert seen == [0, 3]  # 12-05: --family without --suite timed torch.compile on every shape whatever K


def test_host_csv(tmp_path):
    path = tmp_path / "host.csv"
    report.write_host_csv([HostResult(FWD, SMALL, "bf16", {"ours": 8.0, "torch": 20.0, "compile": None})], path)
    (row,) = csv.DictReader(path.open())
    assert list(row) == report.HOST_FIELDS
    assert (row["host_us_ours"], row["host_us_compile"], row["host_us_ours_atomic"]) == ("8.000", "n/a", "")
    assert row["ours_over_torch"] == "0.4000" and row["shape"] == "8x32x8x8"


# --- printed tables --------------------------------------------------------------------------------------------------
def test_tables_print_every_case_aligned_per_family():
    out = io.StringIO()
    report.print_table([op(), op(SMALL, ours=None), forward()], out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith(BWD) and lines[4].startswith(FWD)
    head, large, small = lines[1:4]
    assert "atomic µs" in head and "vs compile" in head and "det cost" in head
    assert len(head) == len(large) == len(small)  # the cells line up under their headers
    assert large.startswith("32x256x56x56") and "0.900" in large and "1.50x" in large
    assert small.startswith("8x32x8x8") and "n/a" in small
    fwd_head, fwd_line = lines[5:7]
    assert "atomic" not in fwd_head and "det cost" not in fwd_head and len(fwd_head) == len(fwd_line)


def test_host_table_and_summary():
    out = io.StringIO()
    hosts = [HostResult(BWD, SMALL, "f32", {"ours": 12.0, "torch": 30.0})]
    report.print_host(hosts, 1000, out)
    report.print_summary(report.summarize([op(SMALL)], hosts), out)
    title, head, line, summary = out.getvalue().splitlines()
    assert "1000 calls" in title and "ours/torch" in head
    assert line.split() == ["8x32x8x8", "f32", "12.00", "30.00", "0.40"]
    assert summary.startswith(f"{BWD} f32: fraction of bound median 0.900")
    assert "vs torch.compile median 1.20x" in summary and summary.endswith("host cost ours/torch 0.40")


def test_png(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "bench.png"
    report.write_png([op(), op(SMALL, ours_atomic=None), op(dtype="bf16", torch=None), forward()], path)
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_suite_png(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "bench_suite.png"
    results = [op((8, c, 7, 7), ours=100.0 + c) for c in range(1, 40)] + [forward(), op(dtype="bf16", compile=None)]
    report.write_suite_png(results, path)
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_the_log_gets_what_is_printed(tmp_path, capsys):
    with report.logged(tmp_path / "bench.log"):
        print("measured 3 things")
        report.print_summary(report.summarize([op()]))
    assert "measured 3 things" in capsys.readouterr().out
    assert "fraction of bound median 0.900" in (tmp_path / "bench.log").read_text()


# --- launch rows -----------------------------------------------------------------------------------------------------
def test_launch_rows_against_the_floor(tmp_path):
    rows = [
        Measure("launch", "ctypes", 2.0, "µs/launch"),
        Measure("launch", "checked", 10.0, "µs/launch"),
        Measure("launch", "cupy", None, "µs/launch", note="ImportError: no cupy"),
        Measure("graph", "replay", 0.5, "µs/kernel", gpu=1.8),
        Measure("load", "cubin", 0.3, "ms"),
    ]
    assert report.ratios_to_floor(rows) == [1.0, 5.0, None, None, None]
    path = tmp_path / "launch.csv"
    report.write_launch_csv(rows, path)
    written = list(csv.DictReader(path.open()))
    assert list(written[0]) == report.LAUNCH_FIELDS
    assert [r["ratio_to_floor"] for r in written] == ["1.000", "5.000", "n/a", "n/a", "n/a"]
    assert written[2]["note"] == "ImportError: no cupy" and written[2]["value"] == "n/a"
    assert written[3]["gpu_us_per_kernel"] == "1.8000"
    out = io.StringIO()
    report.print_launch(rows, out)
    assert "5.00x the floor" in out.getvalue() and "GPU 1.800" in out.getvalue()


def test_a_failing_section_becomes_one_row_saying_why():
    def broken() -> list[Measure]:
        raise OSError("libcuda.so.1: cannot open shared object file")

    (row,) = launch.guarded("graph", "CUDA graph replay", "µs/kernel", broken)
    assert (row.section, row.name, row.value, row.unit) == ("graph", "CUDA graph replay", None, "µs/kernel")
    assert row.note == "OSError: libcuda.so.1: cannot open shared object file"
    rows = [Measure("load", "cubin", 0.3, "ms")]
    assert launch.guarded("load", "module load", "ms", lambda: rows) == rows


def test_third_party_launchers_get_addresses_and_typed_scalars():
    from rust_kernels.args import Packed

    arrays = ["dy", "x"]
    packed = [Packed("ptr", 0x1000, 64), Packed("ptr", 0x2000, 64), Packed("i32", 7), Packed("f32", 1e-5)]
    got = launch.launcher_args([*arrays, 7, 1e-5], packed, lambda array, address: (array, address))
    assert got[:2] == (("dy", 0x1000), ("x", 0x2000))
    assert type(got[2]) is np.int32 and got[2] == 7
    assert type(got[3]) is np.float32 and got[3] == np.float32(1e-5)


def test_cuda_core_namespace_falls_back_to_experimental(monkeypatch):
    old = types.ModuleType("cuda.core")  # 0.x: the API lives in cuda.core.experimental
    experimental = types.ModuleType("cuda.core.experimental")
    experimental.launch = lambda *args: None  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cuda.core", old)
    monkeypatch.setitem(sys.modules, "cuda.core.experimental", experimental)
    assert launch.cuda_core() is experimental
    new = types.ModuleType("cuda.core")
    new.launch = lambda *args: None  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cuda.core", new)
    assert launch.cuda_core() is new


def test_expect_success():
    launch.expect_success(0, "cuLaunchKernel")
    launch.expect_success(types.SimpleNamespace(value=0), "cuLaunchKernel")
    with pytest.raises(RuntimeError, match="cuLaunchKernel failed with CUresult 700"):
        launch.expect_success(700, "cuLaunchKernel")


# --- the op benchmark's loop, with fake callables ---------------------------------------------------------------------
def test_a_failing_column_is_na_and_its_reason_printed_once():
    out = io.StringIO()
    failures = ops.Failures(out)
    calls = {
        "bound": lambda: 4.0,
        "torch": fails(RuntimeError("expected scalar type Float but found BFloat16")),
        "ours": lambda: 1.0,
        "extra": lambda: 99.0,  # not a column the report knows: not measured
    }

    def measure(timed: Mapping[str, Callable[[], float]]) -> dict[str, float]:
        return {column: call() for column, call in timed.items()}

    first = ops.measure_columns(calls, measure, failures, BWD, "8x32x8x8 bf16")
    second = ops.measure_columns(calls, measure, failures, BWD, "32x256x56x56 bf16")
    assert first == second == {"ours": 1.0, "torch": None, "bound": 4.0}
    assert list(first) == ["ours", "torch", "bound"]  # report order
    reason = "RuntimeError: expected scalar type Float but found BFloat16"
    assert out.getvalue().splitlines() == [f"  torch n/a for {BWD} 8x32x8x8 bf16: {reason}"]
    assert failures.failed("torch") and not failures.failed("ours")
    assert failures.lines() == [f"{BWD} torch: n/a in 2 case(s); first reason: {reason}"]


def test_a_column_failing_only_while_timed_is_na_and_the_others_are_timed_alone():
    out = io.StringIO()
    failures = ops.Failures(out)
    runs = {"ours": 0, "torch": 0}

    def call(column: str, us: float, fails_after: int | None = None) -> Callable[[], float]:
        def run() -> float:
            runs[column] += 1
            if fails_after is not None and runs[column] > fails_after:
                raise RuntimeError("CUDA out of memory")
            return us

        return run

    def measure(timed: Mapping[str, Callable[[], float]]) -> dict[str, float]:
        return {column: max(c() for c in [call] * 3) for column, call in timed.items()}

    calls = {"ours": call("ours", 1.0), "torch": call("torch", 2.0, fails_after=2)}
    assert ops.measure_columns(calls, measure, failures, BWD, "8x32x8x8 bf16") == {"ours": 1.0, "torch": None}
    assert out.getvalue() == f"  torch n/a for {BWD} 8x32x8x8 bf16: RuntimeError: CUDA out of memory\n"


def test_families_without_bench_support_are_named():
    class Bare(baselines.Baseline):
        family = "bare"
        bench_shapes = [(1, 2)]  # noqa: RUF012

    assert ops.why_not_benchmarked(Bare(), None) == "it defines no bench_calls"
    assert ops.why_not_benchmarked(baselines.baseline(BWD), None) is None
    assert ops.host_shape(baselines.baseline(BWD).bench_shapes) == SMALL


class FakeFamily(baselines.Baseline):
    """Two shapes, no atomic mode; its compile column fails; every call runs a fixed time on the fake GPU."""

    family = "fake_family"
    dtypes = ("f32",)
    bench_shapes = [(4, 4), (2, 2)]  # noqa: RUF012

    def __init__(self, gpu: FakeGpu) -> None:
        self.gpu = gpu
        self.inputs_seen: list[tuple] = []

    def inputs(self, shape, dtype, seed=0):
        self.inputs_seen.append((shape, dtype))
        return {"x": np.zeros(shape, np.float32)}

    def moved_bytes(self, shape, dtype):
        return 2 * int(np.prod(shape)) * 4

    def bench_calls(self, tensors):
        assert isinstance(tensors["x"], np.ndarray)
        return {
            "ours": self.gpu.kernel(5.0),
            "torch": self.gpu.kernel(10.0),
            "compile": fails(RuntimeError("inductor: no C compiler")),
            "bound": self.gpu.kernel(4.0),
        }


def test_the_op_benchmark_times_every_case_and_the_host_cost_on_the_smallest_shape(monkeypatch, capsys):
    gpu = FakeGpu()
    family = FakeFamily(gpu)
    monkeypatch.setattr(ops, "device_tensors", lambda f, shape, dtype: f.inputs(shape, dtype))
    done = ops.run(gpu, [family], ["f32", "bf16"], reps=20, host_calls=10)
    assert family.inputs_seen == [((4, 4), "f32"), ((2, 2), "f32")]  # bf16 is not among the family's dtypes
    assert gpu.resets == 2  # torch.compile's caches dropped before each case
    big, _ = done.results
    assert list(big.us) == ["ours", "torch", "compile", "bound"] and big.us["compile"] is None
    assert [big.us[c] for c in ("ours", "torch", "bound")] == pytest.approx([5.0, 10.0, 4.0])
    assert big.nbytes == 128 and big.fraction_of_bound() == pytest.approx(0.8)
    assert big.speedup("torch") == pytest.approx(2.0)
    (host,) = done.hosts
    assert host.shape == (2, 2) and host.us["compile"] is None and host.us["ours"] is not None
    printed = capsys.readouterr().out
    assert "not benchmarked in ['bf16']" in printed
    assert printed.count("inductor: no C compiler") == 1
    assert done.failures.lines() == ["fake_family compile: n/a in 3 case(s); first reason: RuntimeError: inductor: "
                                     "no C compiler"]  # fmt: skip


def test_compile_every_k_times_torch_compile_on_every_kth_shape_only(monkeypatch):
    gpu = FakeGpu()
    family = FakeFamily(gpu)
    monkeypatch.setattr(ops, "device_tensors", lambda f, shape, dtype: f.inputs(shape, dtype))
    shapes = [(n, 4) for n in range(1, 8)]
    done = ops.run(gpu, [family], ["f32"], reps=20, shapes=shapes, host_calls=10, compile_every=3)
    compiled = {r.shape[0]: "compile" in r.us for r in done.results}
    assert [compiled[n] for n in range(1, 8)] == [True, False, False, True, False, False, True]
    assert [r.shape[0] - 1 for r in done.results] == suite.spread(7)  # spread over the list: a cut run samples it
    assert all(r.us["ours"] is not None for r in done.results)
    never = ops.run(gpu, [family], ["f32"], reps=20, shapes=shapes, host_calls=10, compile_every=0)
    assert len(never.results) == 7 and not any("compile" in r.us for r in never.results)


def test_cases_run_shape_by_shape_and_none_begins_past_the_budget(monkeypatch, capsys):
    gpu = FakeGpu()
    first, second = FakeFamily(gpu), FakeFamily(gpu)
    second.family = "other_family"
    monkeypatch.setattr(ops, "device_tensors", lambda f, shape, dtype: f.inputs(shape, dtype))
    done = ops.run(gpu, [first, second], ["f32"], reps=20, host_calls=10)
    order = [("fake_family", (4, 4)), ("other_family", (4, 4)), ("fake_family", (2, 2)), ("other_family", (2, 2))]
    assert [(r.family, r.shape) for r in done.results] == order
    late = ops.run(gpu, [first, second], ["f32"], reps=20, host_calls=10, deadline=0.0)
    assert late.results == [] and "4 of 4 cases not begun" in capsys.readouterr().out


def test_a_case_whose_setup_fails_is_all_na(monkeypatch):
    gpu = FakeGpu()
    family = FakeFamily(gpu)

    def broken(f: Any, shape: Any, dtype: str) -> Any:
        raise MemoryError("CUDA out of memory")

    monkeypatch.setattr(ops, "device_tensors", broken)
    done = ops.run(gpu, [family], ["f32"], reps=20, shapes=[(3, 3)])
    (result,) = done.results
    assert result.us == dict.fromkeys(ops.REQUIRED) and result.shape == (3, 3)
    assert done.hosts == [] and done.failures.failed("setup")


# --- the command line ------------------------------------------------------------------------------------------------
def test_options():
    options = bench.parser().parse_args([])
    assert options.dtype == ["f32", "bf16"] and options.reps == 30 and options.shapes is None
    assert options.family == [b.name for b in baselines.baselines()] and BWD in options.family
    assert not options.skip_ops and not options.skip_launch and options.host_calls == ops.HOST_CALLS
    argv = ["--dtype", "f64", "f16", "--reps", "40", "--skip-launch", "--out", "x", "--family", FWD,
            "--shapes", "8x32x8x8", "2,3,4,5", "--host-calls", "50"]  # fmt: skip
    options = bench.parser().parse_args(argv)
    assert options.dtype == ["f64", "f16"] and options.reps == 40 and options.skip_launch and not options.skip_ops
    assert options.family == [FWD] and options.shapes == [(8, 32, 8, 8), (2, 3, 4, 5)] and options.host_calls == 50
    for wrong in (["--reps", "5"], ["--dtype", "i32"], ["--family", "nope"], ["--shapes", "8x0"], ["--shapes", "ax2"]):
        with pytest.raises(SystemExit):
            bench.parser().parse_args(wrong)


def test_main_without_a_gpu_says_why_and_returns_2(tmp_path, capsys):
    if driver.gpu_available()[0]:
        pytest.skip("a GPU is present")
    assert bench.main(["--out", str(tmp_path / "out")]) == 2
    assert "cannot run: no GPU" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_main_without_torch_says_why_and_returns_2(monkeypatch, capsys):
    monkeypatch.setattr(driver, "gpu_available", lambda: (True, "1 CUDA device(s)"))
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    assert bench.main([]) == 2
    assert "cannot run: PyTorch is not installed" in capsys.readouterr().err


@pytest.mark.parametrize("ours_fails", [False, True])
def test_main_writes_every_file_and_the_log(monkeypatch, tmp_path, ours_fails):
    gpu = FakeGpu()
    monkeypatch.setattr(bench, "unavailable", lambda: None)
    monkeypatch.setitem(sys.modules, "torch", gpu)
    monkeypatch.setattr(ops, "device_tensors", lambda f, shape, dtype: f.inputs(shape, dtype))
    fake = FakeFamily(gpu)
    if ours_fails:
        monkeypatch.setattr(fake, "bench_calls", lambda tensors: {"ours": fails(RuntimeError("bad launch"))})
    monkeypatch.setattr(baselines, "baseline", lambda name: fake)
    monkeypatch.setattr(launch, "run", lambda torch: [Measure("launch", "ctypes", 2.0, "µs/launch")])
    out = tmp_path / "out"
    status = bench.main(["--family", BWD, "--dtype", "f32", "--reps", "20", "--host-calls", "5", "--out", str(out)])
    assert status == (1 if ours_fails else 0)
    rows = list(csv.DictReader((out / "bench.csv").open()))
    assert [(r["family"], r["shape"]) for r in rows] == [("fake_family", "4x4"), ("fake_family", "2x2")]
    assert [r["shape"] for r in csv.DictReader((out / "host.csv").open())] == ["2x2"]
    (launched,) = csv.DictReader((out / "launch.csv").open())
    assert launched["value"] == "2.0000"
    log = (out / "bench.log").read_text()
    assert "device: Fake GPU" in log and "wrote" in log and "[launch] ctypes" in log
    assert ("bad launch" in log) is ours_fails
    assert (out / "bench.png").exists() or "bench.png not written: matplotlib is missing" in log


# --- on the GPU ------------------------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_main_on_a_tiny_shape(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "out"
    argv = [
        "--shapes",
        "8x32x8x8",
        "--dtype",
        "f32",
        "bf16",
        "--reps",
        "20",
        "--host-calls",
        "200",
        "--out",
        str(out),
        "--family",
        BWD,
        FWD,
    ]  # fmt: skip (4-D shapes: the BatchNorm2d families)
    assert bench.main(argv) == 0
    rows = list(csv.DictReader((out / "bench.csv").open()))
    assert {r["family"] for r in rows} == {BWD, FWD}
    assert len(rows) == 2 * 2
    for row in rows:
        assert all(float(row[f"us_{c}"]) > 0 for c in ("ours", "torch", "bound")), row
    for row in csv.DictReader((out / "host.csv").open()):
        assert float(row["host_us_ours"]) > 0 and float(row["ours_over_torch"]) > 0, row
    launches = {r["name"]: r for r in csv.DictReader((out / "launch.csv").open())}
    assert float(launches["ctypes cuLaunchKernel (prebuilt params)"]["value"]) > 0
    assert float(launches["rust_kernels launch (checked)"]["value"]) > 0
    assert Path(out / "bench.log").read_text().count("wrote") >= 2
