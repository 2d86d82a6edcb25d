"""The benchmark's pure parts (arithmetic, summaries, CSV and PNG output, the command line) on the CPU."""

import csv
import io
import sys

import pytest

from rust_kernels import bench, cuda
from rust_kernels.bench import Measure, OpResult

LARGE = (32, 256, 56, 56)  # moves 308 MB in f32
SMALL = (8, 32, 8, 8)  # moves 197 kB in f32


def result(shape=LARGE, dtype="f32", ours=100.0, ours_atomic=125.0, torch=150.0, bound=90.0):
    return OpResult(shape, dtype, ours, ours_atomic, torch, bound)


def test_bytes_and_bandwidth():
    r = result(shape=(1, 1, 10, 100), ours=10.0)
    assert r.nbytes == 3 * 1000 * 4
    assert r.gbps("ours") == pytest.approx(12000 / 10e-6 / 1e9)
    assert bench.moved_bytes((2, 3, 4, 5), "bf16") == 3 * 120 * 2
    assert bench.moved_bytes((2, 3, 4, 5), "f64") == 3 * 120 * 8


def test_ratios():
    r = result()
    assert r.fraction_of_bound() == pytest.approx(0.9)
    assert r.fraction_of_bound("torch") == pytest.approx(0.6)
    assert r.speedup_vs_torch == pytest.approx(1.5)
    assert r.deterministic_cost == pytest.approx(0.8)


def test_a_missing_column_gives_none_not_an_error():
    r = result(ours_atomic=None, torch=None)
    assert r.gbps("ours_atomic") is None
    assert r.fraction_of_bound("ours_atomic") is None
    assert r.speedup_vs_torch is None
    assert r.deterministic_cost is None
    assert r.fraction_of_bound() == pytest.approx(0.9)


def test_summary_per_dtype():
    results = [
        result(LARGE, "f32", ours=100.0, bound=90.0, torch=200.0),  # 0.90 of bound, 2.0x torch
        result((32, 2048, 7, 7), "f32", ours=100.0, bound=98.0, torch=100.0),  # 0.98, 1.0x
        result(SMALL, "f32", ours=100.0, bound=50.0, torch=300.0),  # 0.50 (too small to count for the min), 3.0x
        result(LARGE, "bf16", ours=50.0, bound=49.0, torch=None, ours_atomic=None),
    ]
    f32, bf16 = bench.summarize(results)
    assert f32.dtype == "f32"
    assert f32.median_fraction == pytest.approx(0.90)
    assert f32.min_fraction_large == pytest.approx(0.90)
    assert f32.median_speedup == pytest.approx(2.0)
    assert f32.min_speedup == pytest.approx(1.0)
    assert f32.median_det_cost == pytest.approx(0.8)
    assert bf16.median_fraction == pytest.approx(0.98)
    assert bf16.median_speedup is None and bf16.min_speedup is None and bf16.median_det_cost is None


def test_summary_of_small_shapes_only_has_no_large_minimum():
    (summary,) = bench.summarize([result(SMALL)])
    assert summary.min_fraction_large is None
    assert summary.median_fraction == pytest.approx(0.9)


def test_csv(tmp_path):
    path = tmp_path / "bench.csv"
    bench.write_csv([result(), result(SMALL, "bf16", ours_atomic=None)], path)
    rows = list(csv.DictReader(path.open()))
    assert list(rows[0]) == bench.CSV_FIELDS
    assert [rows[0][k] for k in "BCHW"] == ["32", "256", "56", "56"]
    assert rows[0]["bytes"] == str(3 * 32 * 256 * 56 * 56 * 4)
    assert float(rows[0]["us_ours"]) == 100.0
    assert float(rows[0]["fraction_of_bound_ours"]) == pytest.approx(0.9)
    assert float(rows[0]["speedup_vs_torch"]) == pytest.approx(1.5)
    assert float(rows[0]["gbps_bound"]) == pytest.approx(result().nbytes / 90e3, rel=1e-3)
    assert rows[1]["dtype"] == "bf16"
    assert rows[1]["us_ours_atomic"] == rows[1]["deterministic_cost"] == "n/a"


def test_table_and_summary_print_every_case():
    out = io.StringIO()
    results = [result(), result(SMALL, ours=None)]
    bench.print_table(results, out)
    bench.print_summary(bench.summarize(results), out)
    lines = out.getvalue().splitlines()
    assert "32x256x56x56" in lines[1] and "0.900" in lines[1]
    assert "8x32x8x8" in lines[2] and "n/a" in lines[2]
    assert lines[3].startswith("f32: fraction of bound median 0.900")


def test_png(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "bench.png"
    bench.write_png([result(), result(SMALL, ours_atomic=None), result(dtype="bf16", torch=None)], path)
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_launch_rows_against_the_floor(tmp_path):
    rows = [
        Measure("launch", "ctypes", 2.0, "µs/launch"),
        Measure("launch", "checked", 10.0, "µs/launch"),
        Measure("launch", "cupy", None, "µs/launch", note="ImportError: no cupy"),
        Measure("graph", "replay", 0.5, "µs/kernel", gpu=1.8),
        Measure("load", "cubin", 0.3, "ms"),
    ]
    assert bench.ratios_to_floor(rows) == [1.0, 5.0, None, None, None]
    path = tmp_path / "launch.csv"
    bench.write_launch_csv(rows, path)
    written = list(csv.DictReader(path.open()))
    assert [r["ratio_to_floor"] for r in written] == ["1.000", "5.000", "n/a", "n/a", "n/a"]
    assert written[2]["note"] == "ImportError: no cupy"
    assert written[3]["gpu_us_per_kernel"] == "1.8000"
    out = io.StringIO()
    bench.print_launch(rows, out)
    assert "5.00x the floor" in out.getvalue() and "GPU 1.800" in out.getvalue()


def test_a_failing_section_becomes_one_row_saying_why():
    def broken():
        raise OSError("libcuda.so.1: cannot open shared object file")

    (row,) = bench.guarded("graph", "CUDA graph replay", "µs/kernel", broken)
    assert (row.section, row.name, row.value, row.unit) == ("graph", "CUDA graph replay", None, "µs/kernel")
    assert row.note == "OSError: libcuda.so.1: cannot open shared object file"
    rows = [Measure("load", "cubin", 0.3, "ms")]
    assert bench.guarded("load", "module load", "ms", lambda: rows) == rows


def test_options():
    options = bench.parser().parse_args([])
    assert options.dtype == ["f32", "bf16"] and options.reps == 30 and options.launch
    options = bench.parser().parse_args(["--dtype", "f64", "f16", "--reps", "40", "--no-launch", "--out", "x"])
    assert options.dtype == ["f64", "f16"] and options.reps == 40 and not options.launch
    for wrong in (["--reps", "5"], ["--dtype", "i32"]):
        with pytest.raises(SystemExit):
            bench.parser().parse_args(wrong)


def test_main_without_a_gpu_says_why_and_returns_2(tmp_path, capsys):
    if cuda.gpu_available()[0]:
        pytest.skip("a GPU is present")
    assert bench.main(["--out", str(tmp_path / "out")]) == 2
    assert "cannot run: no GPU" in capsys.readouterr().out
    assert not (tmp_path / "out").exists()


def test_main_without_torch_says_why_and_returns_2(monkeypatch, capsys):
    monkeypatch.setattr(cuda, "gpu_available", lambda: (True, "1 CUDA device(s)"))
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    assert bench.main([]) == 2
    assert "cannot run: PyTorch is not installed" in capsys.readouterr().out
