"""`python -m rust_kernels sanitize`, its parts that need no GPU: the case list, reading the sanitizer's summaries,
the parent's plumbing (with a stand-in for compute-sanitizer) and the missing-tool path."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from rust_kernels import cli, registry, sanitize
from rust_kernels.kernels import CATALOGUE


@pytest.mark.parametrize("tool", list(sanitize.TOOLS))
def test_every_tool_runs_every_kernel_variant_of_every_family(tool):
    kernels = {launch.kernel.name for _, plan, _ in sanitize.cases(tool) for launch in plan.launches}
    assert kernels == {cls.spec.name for cls in CATALOGUE.values()}


def test_the_cases_cover_every_dtype_size_and_every_mode_const_of_every_kernel():
    """A dtype of each size (f16 addresses memory as bf16 does), and every value of every const but the CTA size
    (VECTORIZED, DETERMINISTIC)."""
    covered: dict[str, set] = {}
    for kernel in (launch.kernel for _, plan, _ in sanitize.cases("memcheck") for launch in plan.launches):
        modes = [(c.name, v) for c, v in zip(kernel.spec.consts, kernel.const_values, strict=True)]
        covered.setdefault(kernel.name, set()).update([("dtype", kernel.dtype), *modes])
    for cls in CATALOGUE.values():
        spec = cls.spec
        wanted = {("dtype", d) for d in spec.dtypes if d != "f16"}  # the mixed variants run bf16 activations
        wanted |= {(c.name, v) for c in spec.consts if c.name != "BLOCK_HW" for v in c.values()}
        assert wanted <= covered[spec.name], (spec.name, wanted - covered[spec.name])


def test_the_cases_reach_the_branches_of_the_batch_norm_kernels():
    """Split > 1 in both combination modes, the warp kernel on one CTA and on many, H*W not a multiple of the CTA
    and rows of packs."""
    families = [f for f in registry.families() if f.name.startswith("batch_norm_2d")]
    plans = [(plan, shape) for _, plan, shape in sanitize.cases("memcheck", families)]
    split = {(p.kernel.deterministic, p.value("SPLIT") > 1) for p, _ in plans if p.kernel.name.endswith("_split")}
    assert split == {(0, False), (0, True), (1, False), (1, True)}
    assert {p.value("CTAS") > 1 for p, _ in plans if p.kernel.name.endswith("_warp")} == {False, True}
    assert all(any(s[2] * s[3] % p.kernel.block_dim[0] for p, s in plans if p.kernel.name == name)
               for name in {p.kernel.name for p, _ in plans})  # fmt: skip
    assert {p.kernel.vectorized for p, s in plans if p.kernel.name.endswith("_split") and s[2] * s[3] > 1024} == {
        0, 1, 2
    }  # fmt: skip


def test_racecheck_and_synccheck_keep_to_one_dtype_per_accumulation_type():
    """f32 and f64, plus bf16 activations for the mixed-precision variants (which hold no other storage type)."""
    for tool in ("racecheck", "synccheck"):
        dtypes = {family.inputs_key(plan) for family, plan, _ in sanitize.cases(tool)}
        assert dtypes == {"f32", "f64", "bf16-f32"}
    assert sanitize.tool_dtypes("initcheck", ("f32", "f64", "bf16", "f16", "bf16-f32", "f16-f32")) == [
        "f32", "f64", "bf16", "bf16-f32"
    ]  # fmt: skip
    assert len(sanitize.cases("racecheck")) < len(sanitize.cases("memcheck")) / 2


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("========= COMPUTE-SANITIZER\nsanitize child: 9 cases run, 0 failed\n========= ERROR SUMMARY: 0 errors\n",
         sanitize.Summary(0)),
        ("========= Invalid __global__ write of size 4 bytes\n...\n========= ERROR SUMMARY: 1 error\n",
         sanitize.Summary(1)),
        ("========= ERROR SUMMARY: 3 errors\n========= ERROR SUMMARY: 12 errors\n", sanitize.Summary(12)),
        ("========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n", sanitize.Summary(0, 0)),
        ("========= RACECHECK SUMMARY: 5 hazards displayed (2 errors, 3 warnings)\n========= ERROR SUMMARY: 0 errors",
         sanitize.Summary(2, 3)),
        ("========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n", sanitize.Summary(1, 0)),
        ("Traceback (most recent call last):\n  ...\nModuleNotFoundError: No module named 'torch'\n",
         sanitize.Summary(None)),
        # the entry points named by the reports, the most named first; host frames name none
        ("========= Warning: (Warp Level Programming) Potential WAR hazard detected at __shared__ 0x404 in block "
         "(0,0,0) :\n=========     Read Thread (1,0,0) at a_entry_point+0x2440\n"
         "=========     Write Thread (0,0,0) at a_entry_point+0x34b0\n"
         "=========         Host Frame: cuLaunchKernel [0x39fb94] in libcuda.so.1\n"
         "========= Invalid __shared__ read of size 4 bytes\n=========     at b_entry_point+0x1b0 in lib.rs:12\n"
         "========= RACECHECK SUMMARY: 2 hazards displayed (0 errors, 2 warnings)\n",
         sanitize.Summary(0, 2, ("a_entry_point", "b_entry_point"))),
    ],
)  # fmt: skip
def test_summaries_are_read_from_the_sanitizer_output(output, expected):
    assert sanitize.summary(output) == expected


def test_without_compute_sanitizer_it_says_so_and_exits_2(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(sanitize.shutil, "which", lambda name: None)
    monkeypatch.setattr(sanitize, "FALLBACK", tmp_path / "no" / "compute-sanitizer")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    assert cli.main(["sanitize", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "compute-sanitizer not found" in err and str(tmp_path / "no" / "compute-sanitizer") in err


def _stand_in(directory: Path, body: str) -> Path:
    """A fake compute-sanitizer: prints what the real one would, ignores its command line."""
    script = directory / "compute-sanitizer"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_the_parent_logs_each_tool_and_fails_on_errors(monkeypatch, capsys, tmp_path):
    body = (
        'case "$2" in racecheck) echo "sanitize child: 2 cases run, 0 failed"; '
        'echo "=========     Write Thread (0,0,0) at k_entry_point+0x34b0"; '
        'echo "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)"; exit 1;; '
        '*) echo "sanitize child: 3 cases run, 0 failed"; echo "========= ERROR SUMMARY: 0 errors";; esac'
    )
    monkeypatch.setenv("PATH", f"{_stand_in(tmp_path, body).parent}:/usr/bin:/bin")
    assert cli.main(["sanitize", "--out", str(tmp_path / "out"), "--tools", "memcheck", "racecheck"]) == 1
    out = capsys.readouterr().out
    assert "memcheck   clean: 0 errors, exit 0" in out and "(3 cases run, 0 failed)" in out
    assert "racecheck  FAILED: 1 errors, exit 1" in out and "FAILED: 1 of 2 tools clean" in out
    assert "(2 cases run, 0 failed); reported in k_entry_point" in out
    log = (tmp_path / "out" / "sanitize.log").read_text()
    assert "===== memcheck: " in log and "--tool memcheck" in log and "RACECHECK SUMMARY: 1 hazard" in log


def test_a_tool_that_hangs_is_killed_and_counted_as_failed(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("PATH", f"{_stand_in(tmp_path, 'sleep 30').parent}:/usr/bin:/bin")
    assert cli.main(["sanitize", "--out", str(tmp_path), "--tools", "synccheck", "--timeout", "1"]) == 1
    assert "synccheck  FAILED: no summary, timed out" in capsys.readouterr().out


def test_memcheck_runs_every_catalogue_instance():
    """Issue 9.14: every instance (each dtype, CTA size and mode of every kernel) under at least memcheck."""
    from rust_kernels.kernels import instances

    ran = {launch.kernel for _, plan, _ in sanitize.cases("memcheck") for launch in plan.launches}
    assert set(instances()) <= ran, sorted(k.id for k in set(instances()) - ran)


def test_kernel_selects_the_cases_launching_it_and_an_unknown_name_is_refused(capsys, monkeypatch):
    """`sanitize --kernel NAME`: only the plans that launch that kernel (one step of a plan counts), over every family
    that has such plans; a name the catalogue lacks is an error naming the option, before anything runs."""
    picked = sanitize.cases("memcheck", None, ["batch_norm_2d_warp_backward"])
    assert picked and all(any(launch.kernel.name == "batch_norm_2d_warp_backward" for launch in plan.launches)
                          for _, plan, _ in picked)  # fmt: skip
    assert {family.name for family, _, _ in picked} >= {"batch_norm_2d_backward", "batch_norm_2d_add_relu_backward"}
    with pytest.raises(SystemExit) as stop:
        sanitize.main(["--kernel", "batch_norm_2d_no_such_kernel"])
    assert stop.value.code == 2 and "--kernel: no kernel named batch_norm_2d_no_such_kernel" in capsys.readouterr().err
    monkeypatch.setattr(sanitize, "find_sanitizer", lambda: None)  # a known name passes on to the sanitizer's lookup
    assert sanitize.main(["--kernel", "batch_norm_2d_warp_backward"]) == 2
    assert "compute-sanitizer not found" in capsys.readouterr().err


def test_a_shard_runs_part_of_each_tools_cases_and_the_child_gets_the_same_part(monkeypatch, capsys, tmp_path):
    """`sanitize --shard K/N`: check.shard's part of each tool's cases, the parts together every case once; the child
    under the sanitizer is called with the same part."""
    whole = sanitize.cases("synccheck", None, ["batch_norm_2d_warp_backward"])
    parts = [sanitize.cases("synccheck", None, ["batch_norm_2d_warp_backward"], (k, 3)) for k in (1, 2, 3)]
    assert sorted(map(repr, (c for p in parts for c in p))) == sorted(map(repr, whole)) and all(parts)
    body = (
        'echo "$@" > "$(dirname "$0")/argv"; echo "sanitize child: 1 cases run, 0 failed"; '
        'echo "ERROR SUMMARY: 0 errors"'
    )
    script = _stand_in(tmp_path, body)
    monkeypatch.setenv("PATH", f"{script.parent}:/usr/bin:/bin")
    argv = ["--out", str(tmp_path / "out"), "--tools", "synccheck", "--kernel", "batch_norm_2d_warp_backward"]
    assert sanitize.main([*argv, "--shard", "2/3"]) == 0
    assert f"synccheck: {len(parts[1])} cases under" in capsys.readouterr().out
    assert (script.parent / "argv").read_text().split()[-2:] == ["--shard", "2/3"]
