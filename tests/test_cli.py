"""The command line's contract (README, "Command line"): a usage or environment problem is one line `error: ...` on
stderr and exit status 2 (argparse's usage message for a malformed option), 1 only when checks fail; `--help` lists
every command with a full-sentence description."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from rust_kernels import check, cli, driver, fuzz, registry
from rust_kernels.errors import ArgumentError

COMMANDS = ["run", "build", "check", "bench", "sanitize", "fuzz", "tune"]
NO_GPU = (False, "no usable CUDA driver or device (a test's stand-in)")


def _one_error_line(err: str) -> str:
    assert "Traceback" not in err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver, "gpu_available", lambda: NO_GPU)


# --- --help --------------------------------------------------------------------------------------------------------


def _help(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> str:
    monkeypatch.setenv("COLUMNS", "1000")  # one line per command: argparse wraps help to the terminal's width
    with pytest.raises(SystemExit) as info:
        cli.main(["--help"])
    assert info.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", COMMANDS)
def test_help_describes_every_command_in_a_full_sentence(command, monkeypatch, capsys):
    found = re.search(rf"^ +{command} {{2,}}(\S.*)$", _help(monkeypatch, capsys), re.MULTILINE)
    assert found, f"{command} is not listed"
    assert found[1][0].isupper() and found[1].endswith("."), found[1]


def test_the_module_docstring_lists_the_same_commands(monkeypatch, capsys):
    described = dict(re.findall(r"^ +(\w+) {2,}(\S.*)$", _help(monkeypatch, capsys), re.MULTILINE))
    assert list(described) == COMMANDS
    doc = " ".join(cli.__doc__.split())
    for command, description in described.items():
        assert f"{command} {description}" in doc, command


# --- check -------------------------------------------------------------------------------------------------------


@pytest.mark.skipif(driver.gpu_available()[0], reason="a GPU is present")
def test_check_without_a_gpu_is_one_error_line_and_exit_2_from_the_real_cli(tmp_path):
    done = subprocess.run([sys.executable, "-m", "rust_kernels", "check"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert _one_error_line(done.stderr).startswith("error: no GPU to check on (")
    assert "use --backend host for the CPU emulator" in done.stderr


def test_check_on_cuda_without_a_gpu_runs_nothing(no_gpu, monkeypatch, capsys):
    monkeypatch.setattr(check, "run", lambda *_: pytest.fail("a check ran without a GPU"))
    assert cli.main(["check", "--backend", "cuda"]) == 2
    assert _one_error_line(capsys.readouterr().err) == (
        f"error: no GPU to check on ({NO_GPU[1]}); use --backend host for the CPU emulator\n"
    )


def _result(error: str = "") -> check.Result:
    return check.Result("family", "plan", "kernel", "f32", (1, 1, 1, 1), 0.0, 0.0, 0.5, 1.0, error)


@pytest.mark.parametrize(("errors", "status"), [([""], 0), (["", "launch failed"], 1)])
def test_check_exits_1_only_when_a_check_fails(errors, status, monkeypatch):
    monkeypatch.setattr(check, "run", lambda *_: [_result(e) for e in errors])
    assert cli.main(["check", "--backend", "host"]) == status


def test_check_that_runs_nothing_is_one_error_line_and_exit_2(monkeypatch, capsys):
    monkeypatch.setattr(check, "run", lambda *_: [])
    assert cli.main(["check", "--backend", "host"]) == 2
    assert "no check ran" in _one_error_line(capsys.readouterr().err)


def test_check_kernel_runs_only_the_plans_launching_it_and_refuses_an_unknown_name(capfd):
    """`check --kernel NAME`: the cases whose plans launch that kernel, in the emulator, against float64; a name the
    catalogue lacks is one error line naming the option, exit 2, before anything runs."""
    assert cli.main(["check", "--backend", "host", "--kernel", "batch_norm_2d_warp_forward"]) == 0
    out = capfd.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("batch_norm_2d_")]
    assert rows and all(" batch_norm_2d_warp_forward " in row for row in rows) and "0 failed" in out
    assert cli.main(["check", "--backend", "host", "--kernel", "batch_norm_2d_nope"]) == 2
    assert "--kernel: no kernel named batch_norm_2d_nope" in _one_error_line(capfd.readouterr().err)


def test_a_package_error_is_one_error_line_and_exit_2(monkeypatch, capsys):
    def refuses(*_: object) -> list[check.Result]:
        raise ArgumentError("family: no family 'nope'")

    monkeypatch.setattr(check, "run", refuses)
    assert cli.main(["check", "--backend", "host"]) == 2
    assert _one_error_line(capsys.readouterr().err) == "error: family: no family 'nope'\n"


# --- fuzz --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--seed", "-1"], "argument --seed: expected a non-negative integer, got -1"),
        (["--seed", "x"], "argument --seed: invalid int value: 'x'"),
        (["--cases", "0"], "argument --cases: expected a positive integer, got 0"),
        (["--cases", "x"], "argument --cases: invalid int value: 'x'"),
        (["--only", "-1"], "argument --only: expected a non-negative case index, got -1"),
    ],
)
def test_fuzz_refuses_a_bad_option_by_name_with_exit_2(argv, expected, monkeypatch, capsys):
    monkeypatch.setattr(fuzz, "fuzz", lambda *_: pytest.fail("fuzzed with a bad option"))
    with pytest.raises(SystemExit) as info:
        cli.main(["fuzz", "--backend", "host", *argv])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.splitlines()[-1] == f"python -m rust_kernels fuzz: error: {expected}"


@pytest.mark.parametrize("seed", [0, 2**32 - 1, 2**64])  # NumPy's default_rng takes any non-negative integer
def test_fuzz_takes_any_non_negative_seed(seed, monkeypatch):
    ran = []
    monkeypatch.setattr(registry, "families", lambda: [])  # the families are not what this tests
    monkeypatch.setattr(fuzz, "fuzz", lambda families, backend, cases, seed, only: ran.append(seed) or (cases, 0))
    assert cli.main(["fuzz", "--backend", "host", "--cases", "3", "--seed", str(seed)]) == 0
    assert ran == [seed]


def test_fuzz_on_cuda_without_a_gpu_is_one_error_line_and_exit_2(no_gpu, capsys):
    assert cli.main(["fuzz", "--cases", "3"]) == 2
    assert _one_error_line(capsys.readouterr().err).startswith("error: no GPU to fuzz on (")


# --- bench -------------------------------------------------------------------------------------------------------


def test_bench_without_a_gpu_is_one_error_line_and_exit_2(no_gpu, monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(registry, "families", lambda: [])  # its options' choices only
    assert cli.main(["bench", "--out", str(tmp_path / "out")]) == 2
    captured = capsys.readouterr()
    assert _one_error_line(captured.err) == f"error: bench cannot run: no GPU: {NO_GPU[1]}\n"
    assert captured.out == "" and not (tmp_path / "out").exists()


def test_bench_refuses_a_malformed_count_by_name_with_exit_2(monkeypatch, capsys):
    monkeypatch.setattr(registry, "families", lambda: [])
    with pytest.raises(SystemExit) as info:
        cli.main(["bench", "--reps", "x"])
    assert info.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith("argument --reps: expected an integer, got 'x'")


# --- tune --------------------------------------------------------------------------------------------------------


def test_tune_without_a_gpu_is_one_error_line_and_exit_2(no_gpu, capsys, tmp_path):
    export = tmp_path / "table.json"
    assert cli.main(["tune", "--export", str(export)]) == 2
    captured = capsys.readouterr()
    assert _one_error_line(captured.err) == f"error: tune cannot run: no GPU: {NO_GPU[1]}\n"
    assert captured.out == "" and not export.exists()


def test_tune_under_a_cuda_profiler_is_one_error_line_and_exit_2(monkeypatch, capsys, tmp_path):
    """Its instrumented kernels' times would go into the cache and the export: tune names the profiler's variable."""
    from rust_kernels import tuning

    for name in tuning.PROFILER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NV_NSIGHT_INJECTION_TRANSPORT_TYPE", "uds")
    export = tmp_path / "table.json"
    assert cli.main(["tune", "--export", str(export)]) == 2
    captured = capsys.readouterr()
    want = "a CUDA profiler is attached (NV_NSIGHT_INJECTION_TRANSPORT_TYPE is set): run it outside the profiler"
    assert _one_error_line(captured.err) == f"error: tune cannot run: {want}\n"
    assert captured.out == "" and not export.exists()


def test_tune_refuses_an_unknown_op_by_name(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["tune", "--op", "nonsense"])
    assert info.value.code == 2
    assert "argument --op: invalid choice: 'nonsense'" in capsys.readouterr().err


def test_tune_summary_reports_the_gain_over_the_rule():
    from rust_kernels import tuning
    from rust_kernels.bench import tune

    assert tune.summary([]).startswith("tune: nothing timed")
    timed = [tuning.Timed("k1", "a", 10.0, "b", 5.0), tuning.Timed("k2", "a", 4.0, "a", 4.0),
             tuning.Timed("k3", "a", 9.0, "c", 3.0)]  # fmt: skip
    assert tune.summary(timed) == ("tune: 3 keys timed; the rule's plan lost on 2; rule / best time: median "
                                   "2.000x, max 3.000x")  # fmt: skip


def test_an_interrupted_check_reports_the_cases_that_ran_and_exits_130(monkeypatch, capsys):
    """Ctrl-C, or a time limit's SIGTERM (turned into the same interrupt while check runs), mid-run: the table and
    the count of the cases checked so far, then exit 130; the SIGTERM handler is the caller's again afterwards."""
    import signal

    done = []

    def third_interrupts(family, plan, shape, backend):
        if len(done) == 2:
            raise KeyboardInterrupt
        done.append(shape)
        return _result()

    monkeypatch.setattr(check, "check_one", third_interrupts)
    before = signal.getsignal(signal.SIGTERM)
    assert cli.main(["check", "--backend", "host", "--kernel", "batch_norm_2d_warp_forward"]) == cli.INTERRUPTED == 130
    out = capsys.readouterr().out
    total = int(re.search(r"interrupted after 2 of (\d+) cases", out).group(1))
    assert total > 2 and "2 passed, 0 failed" in out and re.search(r"^family\s+plan \(kernel, dtype\)", out, re.M)
    assert signal.getsignal(signal.SIGTERM) is before
    # the handler installed while check runs turns SIGTERM into that interrupt
    monkeypatch.setattr(check, "check_one", lambda *_: signal.raise_signal(signal.SIGTERM))
    assert cli.main(["check", "--backend", "host", "--kernel", "batch_norm_2d_warp_forward"]) == 130
    assert "interrupted after 0 of" in capsys.readouterr().out


def test_check_shards_split_the_cases_into_parts_that_together_hold_each_once(monkeypatch, capsys):
    """`check --shard K/N`: every N-th case from the K-th (each part some of every family and dtype), the parts
    disjoint and together the whole check; a malformed part is refused by name with exit 2, before anything runs."""
    ran: list[list[tuple[str, str, tuple[int, ...]]]] = []

    def records(family, plan, shape, backend):
        ran[-1].append((family.name, plan.label, shape))
        return _result()

    monkeypatch.setattr(check, "check_one", records)
    argv = ["check", "--backend", "host", "--kernel", "batch_norm_2d_warp_forward"]
    for part in ("1/1", "1/3", "2/3", "3/3"):
        ran.append([])
        assert cli.main([*argv, "--shard", part]) == 0
        out = capsys.readouterr().out
        assert (f"shard {part.replace('/', ' of ')}: {len(ran[-1])} cases" in out) == (part != "1/1")
    whole, *parts = ran
    assert sorted(c for p in parts for c in p) == sorted(whole) and len(set(whole)) == len(whole)
    assert all(abs(len(p) - len(whole) / 3) <= 1 for p in parts)
    assert all({c[0] for c in p} == {c[0] for c in whole} for p in parts)  # every family in every part
    for bad in ("0/2", "3/2", "2", "a/b"):
        with pytest.raises(SystemExit) as info:
            cli.main([*argv, "--shard", bad])
        assert info.value.code == 2
        assert capsys.readouterr().err.splitlines()[-1] == (
            f"python -m rust_kernels check: error: argument --shard: expected K/N with 1 <= K <= N (part K of N), "
            f"got {bad!r}"
        )
