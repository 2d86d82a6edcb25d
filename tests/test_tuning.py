"""The autotuner (rust_kernels.tuning): entries per candidate in a per-GPU cache, shipped tables, the modes, graph
capture; on CPU with the device timing replaced, and on the GPU for real."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from rust_kernels import config, tuning
from rust_kernels.errors import ArgumentError
from rust_kernels.families.batch_norm import activation, backward, forward, frozen_fused, residual, training
from rust_kernels.runtime import Placement, Problem

GPU = tuning.Gpu("NVIDIA Test GPU", 8, "sm_90", 1 << 20)
REAL_GPU, REAL_CAPTURING = tuning.gpu, tuning.capturing  # the GPU tests use the device's own
SHAPE = (4, 16, 9, 9)


@pytest.fixture(autouse=True)
def fake_device(tmp_path, monkeypatch):
    # entries in tmp_path/tuning; the kernels from the usual cache (a GPU machine without Rust has them only there)
    monkeypatch.setattr(tuning, "directory", lambda device: tmp_path / "tuning" / device.slug)
    monkeypatch.setenv("RUST_KERNELS_TUNING", "on")
    monkeypatch.setattr(tuning, "gpu", lambda device: GPU)
    monkeypatch.setattr(tuning, "capturing", lambda stream: False)
    for name in tuning.PROFILER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    tuning.forget()
    tuning.table_kernels.cache_clear()  # the tests replace the shipped tables
    yield
    tuning.forget()
    tuning.table_kernels.cache_clear()


class Timer:
    """Stands in for the device timing: each plan's time by its label (default 10 µs), a plan in `fail` raises."""

    def __init__(self, times=None, fail=()):
        self.times, self.fail, self.timed, self.streams = dict(times or {}), set(fail), [], []

    def __call__(self, plans, launch, stream, info):
        self.timed += [p.label for p in plans]
        self.streams.append((stream, launch))
        return [(None, "LaunchError: refused") if p.label in self.fail else (self.times.get(p.label, 10.0), "")
                for p in plans]  # fmt: skip


def problem(shape=SHAPE, deterministic=True):
    return Problem(shape, "f32", "f32", {}, {"deterministic": deterministic, "block_hw": None}, None)


def plans(shape=SHAPE):
    return backward.candidates(problem(shape), Placement(16, GPU.sms))


USER_STREAM = 7  # a stream the caller made (not the legacy default stream)


def choose(candidates, shape=SHAPE, stream=USER_STREAM):
    return tuning.choose(candidates, problem(shape), Placement(16, GPU.sms), 0, stream,
                         lambda timing: ("launcher on", timing))  # fmt: skip


def test_the_fastest_candidate_wins_and_each_has_its_own_entry_file(monkeypatch, tmp_path):
    candidates = plans()
    assert len(candidates) >= 3
    timer = Timer({candidates[2].label: 1.0})
    monkeypatch.setattr(tuning, "time_plans", timer)
    assert choose(candidates) == candidates[2]
    files = list((tmp_path / "tuning" / GPU.slug).glob("*/*.json"))
    assert len(files) == len(candidates) == len(timer.timed)
    records = [json.loads(f.read_text()) for f in files]
    assert sorted(r["plan"] for r in records) == sorted(p.label for p in candidates)
    assert {r["us"] for r in records} == {1.0, 10.0}
    assert tuning.timed[0].winner == candidates[2].label and tuning.timed[0].rule == candidates[0].label


def test_a_keys_candidates_are_named_with_each_distinct_kernels_source_key_computed_once(monkeypatch):
    """The plans of a key hold a few kernels, each plan its own objects of them: choose computes each distinct
    kernel's source key once (rendering them per plan took 0.1-0.15 s a key), and the names are those each plan
    gets alone."""
    from rust_kernels import builder

    candidates = training._candidates("forward", (32, 64, 28, 28), "f32", "f32", 16, GPU.sms, False, 0, False)
    kernels = [launch.kernel for p in candidates for launch in p.launches]
    assert len(set(kernels)) < len(kernels) and len(candidates) >= 5
    alone = [tuning.entry_name("key", p, "sm_90") for p in candidates]
    real, calls = builder.source_key, []
    monkeypatch.setattr(builder, "source_key", lambda kernel, arch=None: calls.append(kernel) or real(kernel, arch))
    monkeypatch.setattr(tuning, "time_plans", Timer())
    tuning.choose(candidates, problem((32, 64, 28, 28)), Placement(16, GPU.sms), 0, USER_STREAM, lambda t: None)
    assert sorted(map(repr, calls)) == sorted(map(repr, set(kernels)))
    keys: dict = {}
    assert [tuning.entry_name("key", p, "sm_90", keys) for p in candidates] == alone


def test_recording_gives_the_entry_names_a_call_consults_and_served_says_whether_they_all_have_entries(monkeypatch):
    """What `tune` journals per case: every candidate's entry name, from the first call of a key and from a later
    call the process decided already; served() holds once each has an entry (none recorded: not served)."""
    candidates = plans()
    monkeypatch.setattr(tuning, "time_plans", Timer())
    with tuning.recording() as first:
        choose(candidates)
    with tuning.recording() as again:
        choose(candidates)
    assert len(first) == len(candidates) and again == first
    assert tuning.served(GPU, first) and not tuning.served(GPU, [])
    assert not tuning.served(GPU, [*first, "0" * 40])
    tuning.forget()  # a later process: the entries from the cache
    assert tuning.served(GPU, first)


def test_the_tune_journal_round_trips_and_an_unreadable_or_other_codes_one_is_empty(tmp_path):
    from rust_kernels.bench import tune

    path = tmp_path / "tuning" / tune.JOURNAL
    assert tune.read_journal(path, "g") == {}
    journal = {'["batch_norm_2d_training", [2, 3, 4, 5], "f32"]': ["a" * 40, "b" * 40]}
    tune.write_journal(path, journal, "g")
    assert tune.read_journal(path, "g") == journal
    assert tune.read_journal(path, "h") == {}  # other code: its cases may have new candidates
    path.write_bytes(gzip.compress(json.dumps(journal).encode()))  # before journals named their code
    assert tune.read_journal(path, "g") == {}
    path.write_bytes(b"not gzip")
    assert tune.read_journal(path, "g") == {}


def test_the_tune_generation_follows_the_specs_and_the_package(monkeypatch, tmp_path):
    """A changed spec or template (a kernel's source key, as a [[registers]] cap changes it) or package module (which
    candidates, as a grid option changes them) is another generation; the same files are the same one."""
    from rust_kernels import resources
    from rust_kernels.bench import tune

    codegen = tmp_path / "codegen"
    (codegen / "batch_norm").mkdir(parents=True)
    spec = codegen / "batch_norm" / "k.toml"
    spec.write_text('name = "k"\n')
    monkeypatch.setattr(resources, "codegen", lambda: codegen)
    first = tune.generation("sm_90")
    assert tune.generation("sm_90") == first
    spec.write_text('name = "k"\n[[registers]]\nmax = 80\n')
    capped = tune.generation("sm_90")
    assert capped != first
    package = tmp_path / "package"
    package.mkdir()
    (package / "training.py").write_text("COOPERATIVE_CTAS_PER_SM = (2, 3)\n")
    monkeypatch.setattr(resources, "PACKAGE", package)
    before = tune.generation("sm_90")
    (package / "training.py").write_text("COOPERATIVE_CTAS_PER_SM = (2, 3, 4)\n")
    assert tune.generation("sm_90") not in (before, capped)


def test_tune_skips_the_cases_a_run_before_journaled_without_building_their_inputs(monkeypatch, tmp_path, capsys):
    """`tune` twice over the same cases (the GPU and its calls stood in for): the first builds each case's inputs
    and times its candidates, the second builds none and says it skipped them; --force runs them all again."""
    torch = pytest.importorskip("torch")
    from rust_kernels.bench import baselines, tune

    class Family:
        name = family = "batch_norm_2d_training"
        dtypes = ("f32",)
        suite = activation = None

        def bench_calls(self, tensors):
            return {"ours": lambda: choose(plans(tensors["shape"]), tensors["shape"])}

    built = []

    def inputs(family, shape, dtype):
        built.append(shape)
        return {"shape": shape}

    monkeypatch.setattr(tune, "unavailable", lambda: None)
    monkeypatch.setattr(tune, "device_tensors", inputs)
    monkeypatch.setattr(tune, "reset_compiled", lambda torch: None)
    monkeypatch.setattr(baselines, "baseline", lambda name: Family())
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(tuning, "_mode", None)
    timer = Timer()
    monkeypatch.setattr(tuning, "time_plans", timer)
    shapes = tmp_path / "shapes.txt"
    shapes.write_text("4x16x9x9\n4x16x7x7\n")
    argv = ["--op", "batch_norm_2d_training", "--shapes", str(shapes), "--dtype", "f32"]
    assert tune.main(argv) == 0
    assert built == [(4, 16, 9, 9), (4, 16, 7, 7)] and len(timer.timed) == sum(len(plans(s)) for s in built)
    tuning.forget()  # a later process
    assert tune.main(argv) == 0
    assert len(built) == 2 and "tune: 2 cases skipped" in capsys.readouterr().out
    tuning.forget()
    assert tune.main([*argv, "--force"]) == 0
    assert len(built) == 4
    tuning.forget()  # other code (a kernel or a candidate changed): every case walked again
    monkeypatch.setattr(tune, "generation", lambda arch: "other")
    assert tune.main(argv) == 0
    assert len(built) == 6


def test_tune_activation_tunes_the_families_that_fuse_one_once_per_activation(monkeypatch, tmp_path):
    """`tune --activation relu silu`: each family that fuses an activation is its own case per activation (their
    calls apply it), each family that fuses none once; by default each as registered; an activation a family
    cannot take is refused, naming it."""
    torch = pytest.importorskip("torch")
    from rust_kernels.bench import baselines, tune

    class Family(baselines.Baseline):
        family = "batch_norm_2d_forward"
        suite = None

        activations = ("relu", "silu", "hardswish")

        def __init__(self, activation):
            self.activation = activation

        @property
        def name(self):
            return f"bench_{self.activation}"

        def bench_calls(self, tensors):
            return {"ours": lambda: called.append((tensors["shape"], self.activation))}

    called = []
    benches = {"batch_norm_2d_training_relu": Family("relu"), "batch_norm_2d_training": Family(None)}
    monkeypatch.setattr(tune, "unavailable", lambda: None)
    monkeypatch.setattr(tune, "device_tensors", lambda family, shape, dtype: {"shape": shape})
    monkeypatch.setattr(tune, "reset_compiled", lambda torch: None)
    monkeypatch.setattr(baselines, "baseline", benches.__getitem__)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(tuning, "_mode", None)
    monkeypatch.setattr(tuning, "directory", lambda info: tmp_path)
    shapes = tmp_path / "shapes.txt"
    shapes.write_text("4x16x9x9\n")
    argv = ["--op", *benches, "--shapes", str(shapes), "--dtype", "f32", "--force"]
    assert tune.main(argv) == 0
    shape = (4, 16, 9, 9)
    assert sorted(called, key=lambda c: str(c[1])) == [(shape, None), (shape, "relu")]
    called.clear()
    assert tune.main([*argv, "--activation", "silu", "hardswish"]) == 0
    assert sorted(called, key=lambda c: str(c[1])) == [(shape, None), (shape, "hardswish"), (shape, "silu")]
    assert benches["batch_norm_2d_training_relu"].activation == "relu"  # copies, the registered bench unchanged
    with pytest.raises(ArgumentError, match=r"activation: bench_relu fuses one of \['relu', .*\], got 'gelu'"):
        tune.main([*argv, "--activation", "gelu"])


def test_a_call_on_the_legacy_default_stream_is_timed_on_the_tuners_own_stream(monkeypatch):
    """The legacy default stream (PyTorch's unless one is set) cannot be captured into a graph: such a call's
    candidates are timed on the tuner's own stream, the launcher made for it; a call on its own stream is timed
    there."""
    monkeypatch.setattr(tuning, "_own_stream", lambda device: 42)
    for width, (stream, timed_on) in enumerate(((0, 42), (1, 42), (USER_STREAM, USER_STREAM))):
        shape = (4, 16, 9, 9 + width)  # a new key each
        timer = Timer()
        monkeypatch.setattr(tuning, "time_plans", timer)
        choose(plans(shape), shape, stream)
        assert timer.streams == [(timed_on, ("launcher on", timed_on))]


def test_a_later_process_reads_the_entries_and_times_nothing(monkeypatch):
    candidates = plans()
    monkeypatch.setattr(tuning, "time_plans", Timer({candidates[1].label: 2.0}))
    choose(candidates)
    tuning.forget()  # a new process: nothing in memory
    again = Timer()
    monkeypatch.setattr(tuning, "time_plans", again)
    assert choose(candidates) == candidates[1]
    assert again.timed == []


def test_adding_a_candidate_times_only_it(monkeypatch):
    candidates = plans()
    monkeypatch.setattr(tuning, "time_plans", Timer())
    choose(candidates[:-1])
    tuning.forget()
    later = Timer({candidates[-1].label: 0.5})
    monkeypatch.setattr(tuning, "time_plans", later)
    assert choose(candidates) == candidates[-1]
    assert later.timed == [candidates[-1].label]


def test_failing_candidates_are_never_chosen_and_all_failing_gives_the_rule(monkeypatch):
    candidates = plans()
    fastest = candidates[1].label
    monkeypatch.setattr(tuning, "time_plans", Timer({fastest: 0.1}, fail={fastest}))
    assert choose(candidates) != candidates[1]
    tuning.forget()
    other = plans((5, 16, 9, 9))
    monkeypatch.setattr(tuning, "time_plans", Timer(fail={p.label for p in other}))
    assert choose(other, (5, 16, 9, 9)) is None  # the caller then takes the rule's plan


def test_a_candidate_whose_kernel_this_machine_lacks_is_dropped_for_the_process_and_tried_again_later(monkeypatch):
    """A kernel neither prebuilt, cached nor buildable here (KernelUnavailable, as time_plans names it) drops its
    candidate in this process without a cache entry: another process, with the kernel built or carried, times it."""
    from rust_kernels.errors import KernelUnavailable

    candidates = plans()
    fastest = candidates[1].label
    lacking = KernelUnavailable(f"{fastest}: no valid entry in the cache and cannot be built here")

    class Lacking(Timer):
        def __call__(self, plans, launch, stream, info):  # time_plans's reason for a launch that raised
            out = super().__call__(plans, launch, stream, info)
            why = (None, f"{type(lacking).__name__}: {lacking}")
            return [why if p.label == fastest else r for p, r in zip(plans, out, strict=True)]

    monkeypatch.setattr(tuning, "time_plans", Lacking({fastest: 0.1}))
    assert choose(candidates) != candidates[1]
    assert len(tuning.entries(GPU)) == len(candidates) - 1  # every other candidate's entry, not the lacking one's
    timer = Timer({fastest: 0.1})
    monkeypatch.setattr(tuning, "time_plans", timer)
    assert choose(candidates) != candidates[1] and timer.timed == []  # this process: decided
    tuning.forget()  # a later process
    assert choose(candidates) == candidates[1] and timer.timed == [fastest]


def test_keys_differ_by_shape_dtype_alignment_and_gpu_and_entries_by_kernel_source():
    place = Placement(16, GPU.sms)
    base = tuning.key(problem(), place, GPU)
    assert base != tuning.key(problem((4, 16, 9, 10)), place, GPU)
    assert base != tuning.key(problem(), Placement(8, GPU.sms), GPU)
    assert base != tuning.key(problem(), place, tuning.Gpu("NVIDIA Other", 8, "sm_90", 1 << 20))
    mixed = Problem(SHAPE, "bf16", "f32", {}, {"deterministic": True, "block_hw": None}, None)
    assert base != tuning.key(mixed, place, GPU)
    plan = plans()[0]
    assert tuning.entry_name(base, plan, "sm_90") != tuning.entry_name(base, plan, "sm_100")  # other source keys


def test_mode_off_chooses_nothing_and_force_times_again(monkeypatch):
    candidates = plans()
    monkeypatch.setattr(tuning, "time_plans", Timer())
    choose(candidates)
    tuning.forget()
    monkeypatch.setenv("RUST_KERNELS_TUNING", "off")
    assert choose(candidates) is None
    monkeypatch.setenv("RUST_KERNELS_TUNING", "force")
    again = Timer({candidates[3].label: 1.0})
    monkeypatch.setattr(tuning, "time_plans", again)
    assert choose(candidates) == candidates[3]
    assert len(again.timed) == len(candidates)
    assert tuning.entries(GPU)[tuning.entry_name(tuning.key(problem(), Placement(16, GPU.sms), GPU),
                                                 candidates[3], GPU.arch)]["us"] == 1.0  # fmt: skip


def test_a_bad_mode_is_a_config_error_naming_the_variable(monkeypatch):
    monkeypatch.setenv("RUST_KERNELS_TUNING", "yes")
    with pytest.raises(config.ConfigError, match="RUST_KERNELS_TUNING='yes'"):
        config.settings()


def test_during_graph_capture_nothing_is_timed_the_known_winner_or_none_is_used(monkeypatch):
    candidates = plans()
    monkeypatch.setattr(tuning, "capturing", lambda stream: True)
    idle = Timer()
    monkeypatch.setattr(tuning, "time_plans", idle)
    assert choose(candidates) is None
    assert idle.timed == []
    monkeypatch.setattr(tuning, "capturing", lambda stream: False)
    monkeypatch.setattr(tuning, "time_plans", Timer({candidates[1].label: 1.0}))
    choose(candidates[:2])  # only some candidates known
    tuning.forget()
    monkeypatch.setattr(tuning, "capturing", lambda stream: True)
    monkeypatch.setattr(tuning, "time_plans", idle)
    assert choose(candidates) == candidates[1]
    assert idle.timed == []


@pytest.mark.parametrize("variable", tuning.PROFILER_VARIABLES)
def test_under_a_cuda_profiler_nothing_is_timed_or_stored_and_afterwards_it_is(monkeypatch, variable):
    """A profiler's instrumented kernels' times must not become entries that later processes trust."""
    candidates = plans()
    monkeypatch.setenv(variable, "uds")
    idle = Timer()
    monkeypatch.setattr(tuning, "time_plans", idle)
    assert choose(candidates) is None
    assert idle.timed == [] and tuning.entries(GPU) == {}
    monkeypatch.delenv(variable)
    timer = Timer({candidates[2].label: 1.0})
    monkeypatch.setattr(tuning, "time_plans", timer)
    assert choose(candidates) == candidates[2]
    assert len(timer.timed) == len(candidates) and len(tuning.entries(GPU)) == len(candidates)


def test_the_shipped_table_serves_an_empty_cache(monkeypatch, tmp_path):
    candidates = plans()
    monkeypatch.setattr(tuning, "time_plans", Timer({candidates[2].label: 3.0}))
    choose(candidates)
    table = tuning.entries(GPU)
    for f in (tmp_path / "tuning").rglob("*.json"):
        f.unlink()
    tuning.forget()
    monkeypatch.setattr(tuning, "shipped", lambda slug: {n: tuning.Entry(**r) for n, r in table.items()})
    idle = Timer()
    monkeypatch.setattr(tuning, "time_plans", idle)
    assert choose(candidates) == candidates[2]
    assert idle.timed == []


def test_kernels_newer_than_the_shipped_table_are_left_out_on_keys_it_serves_and_timed_elsewhere(monkeypatch, tmp_path):
    """A key the shipped table serves is not timed for candidates of kernels none of its plans holds (added since
    it was measured): the table's winner stands. On a key the table lacks, and in the tune command (`use`), they
    are timed with the rest and can win."""

    def block_kernels(plan):
        return any(launch.kernel.name.startswith("batch_norm_2d_block") for launch in plan.launches)

    def candidates(shape):  # 8 x 14 x 14 and 8 x 12 x 12 values a channel: the block kernels are candidates
        out = training._candidates("forward", shape, "f32", "f32", 16, GPU.sms, False, 0, False, blocks=True)
        assert any(map(block_kernels, out)) and not all(map(block_kernels, out))
        return out

    served, unserved = (8, 64, 14, 14), (8, 64, 12, 12)
    plans_served = candidates(served)
    older = [p for p in plans_served if not block_kernels(p)]
    monkeypatch.setattr(tuning, "time_plans", Timer({older[1].label: 2.0}))
    choose(older, served)
    table = tuning.entries(GPU)
    for f in (tmp_path / "tuning").rglob("*.json"):
        f.unlink()
    tuning.forget()
    monkeypatch.setattr(tuning, "shipped", lambda slug: {n: tuning.Entry(**r) for n, r in table.items()})
    tuning.table_kernels.cache_clear()
    fastest = {p.label: 0.5 for p in (*plans_served, *candidates(unserved)) if block_kernels(p)}
    idle = Timer(fastest)
    monkeypatch.setattr(tuning, "time_plans", idle)
    assert choose(plans_served, served) == older[1] and idle.timed == []
    assert block_kernels(choose(candidates(unserved), unserved))
    assert len(idle.timed) == len(candidates(unserved))
    tuning.forget()  # a tune process, in its mode
    tuning.use("on")
    try:
        assert block_kernels(tuning.choose(plans_served, problem(served), Placement(16, GPU.sms), 0, USER_STREAM,
                                           lambda timing: None))  # fmt: skip
    finally:
        tuning.use(None)
    assert sorted(idle.timed[len(candidates(unserved)) :]) == sorted(p.label for p in plans_served if block_kernels(p))
    # A damaged cache file of a table's candidate is timed again, the newer ones still left out (the rule's plan, a
    # block plan here, among them: no time of it to report).
    for f in (tmp_path / "tuning").rglob("*.json"):
        f.unlink()
    tuning.forget()
    name = tuning.entry_name(tuning.key(problem(served), Placement(16, GPU.sms), GPU), older[1], GPU.arch)
    damaged = tmp_path / "tuning" / GPU.slug / name[:2] / f"{name}.json"
    damaged.parent.mkdir(parents=True, exist_ok=True)
    damaged.write_text("{not json")
    again = Timer({older[1].label: 2.0})
    monkeypatch.setattr(tuning, "time_plans", again)
    assert block_kernels(plans_served[0]) and choose(plans_served, served) == older[1]
    assert again.timed == [older[1].label] and tuning.timed[-1].rule_us is None


def test_a_damaged_entry_is_timed_again(monkeypatch, tmp_path):
    candidates = plans()
    monkeypatch.setattr(tuning, "time_plans", Timer())
    choose(candidates)
    damaged = next((tmp_path / "tuning").rglob("*.json"))
    damaged.write_text("{not json")
    tuning.forget()
    again = Timer()
    monkeypatch.setattr(tuning, "time_plans", again)
    choose(candidates)
    assert len(again.timed) == 1
    assert json.loads(damaged.read_text())["us"] == 10.0


def test_candidates_are_the_rules_plan_first_and_fixed_cta_sizes_are_not_tuned():
    place = Placement(16, 132)
    for op, scalars in ((backward.NCHW, {"deterministic": True}), (forward.NCHW, {}),
                        (forward.NATIVE, {"training": True}), (backward.NATIVE, {"training": True})):  # fmt: skip
        for shape in ((32, 256, 56, 56), (128, 2048, 1, 1), (1, 1, 1024, 1024), (64, 720, 7, 7)):
            p = Problem(shape, "bf16", "f32", {}, {**scalars, "block_hw": None}, None)
            candidates = op.candidates(p, place)
            assert candidates[0] == op.choose(p, place), (op.name, shape)
            assert len(set(candidates)) == len(candidates) >= 2
            assert all(isinstance(c.kernel, op.kernels) for c in candidates)
    fixed = Problem(SHAPE, "f32", "f32", {}, {"deterministic": True, "block_hw": 128}, None)
    assert backward.NCHW.candidates(fixed, place) == ()
    cl = Problem((8, 96, 14, 14), "f32", "f32", {}, {"training": True}, (0, 2, 3, 1))
    for c in forward.NATIVE.candidates(cl, place):  # channels_last grids keep each thread on one column
        if c.then:
            assert c.then[0].value("CTAS") * 256 % (96 // 4) == 0
        else:  # the one-launch kernels: COLS divides the row's units
            assert (96 // 4) % c.value("COLS") == 0


# --- on the GPU ------------------------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_gpu_tuning_times_every_candidate_once_and_leaves_the_callers_arrays(monkeypatch):
    """A training forward on a new key: every candidate timed into the cache, the result and the running statistics
    as one untuned call gives (tuning updates scratch copies only), and the next call of the key times nothing."""
    import torch

    monkeypatch.setattr(tuning, "gpu", REAL_GPU)
    monkeypatch.setattr(tuning, "capturing", REAL_CAPTURING)
    from rust_kernels import ops

    torch.manual_seed(0)
    x = torch.randn(16, 40, 13, 11, device="cuda")
    weight, bias = torch.rand(40, device="cuda") + 0.5, torch.randn(40, device="cuda")

    def run():
        mean, var = torch.zeros(40, device="cuda"), torch.ones(40, device="cuda")
        y, _, _ = ops.batch_norm_2d_forward(x, weight, bias, mean, var, True, 0.1, 1e-5)
        return y, mean, var

    monkeypatch.setenv("RUST_KERNELS_TUNING", "off")
    untuned = run()
    ops.batch_norm_2d_forward.op._fast.clear()  # the signature is decided again
    monkeypatch.setenv("RUST_KERNELS_TUNING", "force")
    tuned = run()
    assert len(tuning.timed) == 1
    assert tuning.issued_directly == 0  # on PyTorch's legacy default stream too, every repetition was a graph
    info = tuning.gpu(0)
    assert len(tuning.entries(info)) >= 2
    for a, b in zip(tuned, untuned, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    want_mean = 0.1 * x.double().mean(dim=(0, 2, 3))
    torch.testing.assert_close(tuned[1].double(), want_mean, rtol=1e-5, atol=1e-6)  # updated once, not per timing
    tuning.forget()  # a new process: the entries are read from the cache
    ops.batch_norm_2d_forward.op._fast.clear()
    monkeypatch.setenv("RUST_KERNELS_TUNING", "on")
    run()
    assert tuning.timed == []


@pytest.mark.gpu
def test_gpu_a_new_key_inside_graph_capture_is_not_timed_and_replays_right(monkeypatch):
    import torch

    from rust_kernels import ops

    monkeypatch.setattr(tuning, "gpu", REAL_GPU)
    monkeypatch.setattr(tuning, "capturing", REAL_CAPTURING)
    x = torch.randn(8, 24, 7, 9, device="cuda")
    dy = torch.randn_like(x)
    weight = torch.rand(24, device="cuda") + 0.5
    mean, var = torch.randn(24, device="cuda"), torch.rand(24, device="cuda") + 0.5
    monkeypatch.setenv("RUST_KERNELS_TUNING", "off")  # the rule's plan, no entries written
    want = ops.batch_norm_2d_nchw_backward(dy, x, weight, mean, var)
    monkeypatch.setenv("RUST_KERNELS_TUNING", "on")
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()  # a new stream: the signature's first decision happens during capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        got = ops.batch_norm_2d_nchw_backward(dy, x, weight, mean, var)
    graph.replay()
    torch.cuda.synchronize()
    assert tuning.timed == [] and tuning.entries(tuning.gpu(0)) == {}
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a.cpu().numpy(), b.cpu().numpy())  # the rule's plan, as outside capture


def test_training_candidates_at_hw_1_include_the_channels_last_kernels_and_run_right_in_the_emulator():
    """H*W = 1: NCHW memory is NHWC memory, so the channels_last kernels (rows of C, coalesced; one launch or two)
    are candidates of an NCHW call, the rule's the one-launch one for this small tensor, and give what the NCHW plan
    gives."""
    from rust_kernels import ops

    shape = (6, 40, 1, 1)
    p = Problem(shape, "f32", "f32", {}, {"training": True}, None)
    candidates = forward.NATIVE.candidates(p, Placement(16, 1))
    nhwc = [c for c in candidates if training.reads_channels_last(c.kernel)]
    assert len(nhwc) < len(candidates) and len(candidates[0].launches) == 1 and candidates[0] in nhwc
    two = next(c for c in nhwc if len(c.launches) == 2)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    weight, bias = rng.uniform(0.5, 1.5, 40).astype(np.float32), rng.standard_normal(40).astype(np.float32)
    outs = []
    nchw = next(c for c in candidates if not training.reads_channels_last(c.kernel))
    for plan in (nchw, candidates[0], two):
        mean, var = np.zeros(40, np.float32), np.ones(40, np.float32)
        y, save_mean, save_invstd = ops.batch_norm_2d_forward(x, weight, bias, mean, var, True, 0.1, 1e-5,
                                                              backend="host", plan=plan)  # fmt: skip
        outs.append((y, save_mean, save_invstd, mean, var))
    for out in outs[1:]:
        for a, b in zip(out, outs[0], strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(outs[0][0], (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5) * weight[:, None, None]
                               + bias[:, None, None], rtol=1e-4, atol=1e-5)  # fmt: skip


def test_eval_candidates_at_hw_1_include_the_channels_last_kernels_and_run_right_in_the_emulator():
    """The eval ops at H*W = 1 too: the NCHW ops' candidates include the channels_last kernels (rows of C read
    coalesced, where the NCHW kernels read a channel's values C apart), which give the NCHW plan's results."""
    from rust_kernels import ops

    shape = (6, 40, 1, 1)
    rng = np.random.default_rng(1)
    dy, x = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    weight, bias = rng.uniform(0.5, 1.5, 40).astype(np.float32), rng.standard_normal(40).astype(np.float32)
    mean, var = rng.standard_normal(40).astype(np.float32), rng.uniform(0.5, 2, 40).astype(np.float32)
    calls = {
        ops.batch_norm_2d_nchw_forward_inference: (x, weight, bias, mean, var),
        ops.batch_norm_2d_nchw_backward: (dy, x, weight, mean, var),
    }
    rstd = 1 / np.sqrt(var.astype(np.float64) + 1e-5)
    xhat = (x - mean[:, None, None]) * rstd[:, None, None]
    expected = {
        ops.batch_norm_2d_nchw_forward_inference: (xhat * weight[:, None, None] + bias[:, None, None],),
        ops.batch_norm_2d_nchw_backward: (dy * (weight * rstd)[:, None, None], (dy * xhat).sum((0, 2, 3)),
                                          dy.sum((0, 2, 3))),
    }  # fmt: skip
    for fn, arrays in calls.items():
        _, problem = fn.op.problem(arrays, tuple(s.default for s in fn.op.scalars), "host")
        candidates = fn.op.candidates(problem, Placement(16, 1))
        assert {getattr(c.kernel, "channels_last", 0) for c in candidates} == {0, 1}
        nhwc = next(c for c in candidates if getattr(c.kernel, "channels_last", 0))
        for plan in (candidates[0], nhwc):
            out = fn(*arrays, backend="host", plan=plan)
            for got, want in zip(out if isinstance(out, tuple) else (out,), expected[fn], strict=True):
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_fused_forwards_at_hw_1_run_right_on_both_layouts_kernels_in_the_emulator():
    """The fused forwards (eval act and add + ReLU, training add + ReLU) at H*W = 1: their candidates hold both
    layouts' kernels, and the NCHW plan and a channels_last one give y against a float64 reference."""
    from rust_kernels import ops

    shape, eps = (6, 40, 1, 1), 1e-5
    rng = np.random.default_rng(3)
    x, residual_ = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    weight, bias = rng.uniform(0.5, 1.5, 40).astype(np.float32), rng.standard_normal(40).astype(np.float32)
    mean, var = rng.standard_normal(40).astype(np.float32), rng.uniform(0.5, 2, 40).astype(np.float32)
    x64, chan = x.astype(np.float64), (lambda v: v.astype(np.float64)[:, None, None])
    frozen = (x64 - chan(mean)) / np.sqrt(chan(var) + eps) * chan(weight) + chan(bias)
    batch = (x64 - x64.mean(0)) / np.sqrt(x64.var(0) + eps) * chan(weight) + chan(bias)
    calls = (
        (ops.batch_norm_2d_act_eval_forward, (x, weight, bias, mean, var, eps, "relu"), np.maximum(frozen, 0)),
        (ops.batch_norm_2d_add_relu_eval_forward, (x, residual_, weight, bias, mean, var, eps),
         np.maximum(frozen + residual_, 0)),
        (ops.batch_norm_2d_add_relu_forward, (x, residual_, weight, bias, mean, var, 0.1, eps),
         np.maximum(batch + residual_, 0)),
    )  # fmt: skip
    for fn, args, want in calls:
        arrays = args[: len(fn.op.inputs)]
        _, problem = fn.op.problem(arrays, args[len(fn.op.inputs) :], "host")
        candidates = fn.op.candidates(problem, Placement(16, 1))
        layouts = {training.reads_channels_last(c.launches[-1].kernel): c for c in candidates}
        assert set(layouts) == {False, True}, fn.op.name
        for plan in layouts.values():
            out = fn(*(a.copy() for a in args[:4]), *args[4:], backend="host", plan=plan)
            np.testing.assert_allclose(out if fn.op.name.endswith("eval_forward") else out[0], want, rtol=1e-5,
                                       atol=1e-5, err_msg=f"{fn.op.name} {plan.kernel.id}")  # fmt: skip


def test_the_rules_at_hw_1_take_the_channels_last_kernels_from_their_measured_sizes_on():
    """At H*W = 1 each op's rule runs the channels_last kernels from the size of x where they were measured faster
    (the training add + ReLU forward 64 KiB, eval backward 128 KiB, through an activation 64 KiB, eval forward
    2 MiB; its fused forms alike), the NCHW ones below it; the training ops' rule (alone or with an activation)
    always, in one launch where the tensor is small; the training rule's plan gives what the NCHW plan gives
    (emulator)."""
    from rust_kernels import ops

    def chosen(op, shape, scalars):
        return op.choose(Problem(shape, "f32", "f32", {}, scalars, None), Placement(16, 132))

    def reads_nhwc(op, shape, scalars):
        return any(training.reads_channels_last(launch.kernel) for launch in chosen(op, shape, scalars).launches)

    train, relu = {"training": True}, {"activation": "relu"}
    for op, scalars, elements in ((residual.FORWARD, {}, 16 << 10), (backward.NCHW, {"deterministic": True}, 32 << 10),
                                  (frozen_fused.ACT_BACKWARD, relu, 16 << 10),
                                  (forward.NCHW, {}, 512 << 10), (frozen_fused.ACT_FORWARD, relu, 512 << 10),
                                  (frozen_fused.ADD_RELU_FORWARD, {}, 512 << 10)):  # fmt: skip
        assert reads_nhwc(op, (elements // 1024, 1024, 1, 1), scalars)
        assert not reads_nhwc(op, (elements // 2048, 1024, 1, 1), scalars)
        assert not reads_nhwc(op, (elements // 1024, 1024, 1, 2), scalars)  # H*W = 2: NCHW memory only
    for op, scalars in ((forward.NATIVE, train), (backward.NATIVE, train), (activation.FORWARD, relu)):
        assert len(chosen(op, (4, 1024, 1, 1), scalars).launches) == 1 and reads_nhwc(op, (4, 1024, 1, 1), scalars)
        assert reads_nhwc(op, (1024, 1024, 1, 1), scalars)
        assert not reads_nhwc(op, (4, 1024, 1, 2), scalars)
    shape = (16, 1024, 1, 1)
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape).astype(np.float32)
    weight, bias = rng.uniform(0.5, 1.5, 1024).astype(np.float32), rng.standard_normal(1024).astype(np.float32)
    p = Problem(shape, "f32", "f32", {}, train, None)
    candidates = forward.NATIVE.candidates(p, Placement(16, 132))
    nchw = next(c for c in candidates if not training.reads_channels_last(c.kernel))
    outs = []
    for plan in (forward.NATIVE.choose(p, Placement(16, 132)), nchw):
        mean, var = np.zeros(1024, np.float32), np.ones(1024, np.float32)
        outs.append((*ops.batch_norm_2d_forward(x, weight, bias, mean, var, True, 0.1, 1e-5, backend="host",
                                                plan=plan), mean, var))  # fmt: skip
    for a, b in zip(*outs, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_a_call_asks_for_its_plan_on_the_stream_it_launches_on(monkeypatch):
    """The tuner times on the call's stream: a call without a decided signature hands plan_for that stream (0 on
    the host), so that on a GPU the candidates are timed at all."""
    from rust_kernels import ops

    op = ops.batch_norm_2d_nchw_backward.op
    asked = []
    real = op.plan_for
    monkeypatch.setattr(op, "plan_for", lambda *a, **k: asked.append(a[4:] + tuple(k.values())) or real(*a, **k))
    x = np.ones((2, 3, 4, 4), np.float32)
    c = np.ones(3, np.float32)
    ops.batch_norm_2d_nchw_backward(x, x, c, c, c, backend="host")
    assert asked == [(0,)]


def test_the_shipped_h200_table_serves_suite_keys_of_every_tuned_op_for_the_current_kernels(monkeypatch):
    """The package's H200 table (measured by `tune --export` on an H200) holds every candidate of suite keys for the
    kernels as they are now, eval and training ops, NCHW and channels_last, but those of kernels newer than the
    table (left out there: newer_than_table): an untuned process on an H200 times nothing there. Fails when those
    kernels changed after the table was measured: run `python -m rust_kernels tune --export FILE` on one and merge
    FILE into the table with scripts/merge_tuning_table.py."""
    from rust_kernels import ops
    from rust_kernels.bench import suite

    h200 = tuning.Gpu("NVIDIA H200", 132, "sm_90", 60 << 20)
    monkeypatch.setattr(tuning, "gpu", lambda device: h200)
    assert len(tuning.shipped(h200.slug)) > 1000
    assert all(e.us is not None or e.reason for e in tuning.shipped(h200.slug).values())

    def never() -> tuning.Launcher:
        raise AssertionError("a candidate was timed: the shipped table lacks it")

    shapes = suite.shapes("batch_norm_2d")
    shapes = [shapes[i] for i in suite.spread(len(shapes))[:40]]
    train, frozen, relu = {"training": True}, {"training": False}, {"activation": "relu"}
    calls = [  # (op, its [B, C, H, W] inputs, scalars, memory formats)
        ("batch_norm_2d_nchw_backward", "dy x", {}, (False,)),
        ("batch_norm_2d_nchw_forward_inference", "x", {}, (False,)),
        ("batch_norm_2d_forward", "x", frozen, (True,)),  # the eval channels_last kernels (NCHW: the two above)
        ("batch_norm_2d_backward", "dy x", frozen, (True,)),
        ("batch_norm_2d_act_eval_forward", "x", relu, (False, True)),
        ("batch_norm_2d_act_eval_backward", "dy x", relu, (False, True)),
        ("batch_norm_2d_add_relu_eval_forward", "x residual", {}, (False, True)),
        ("batch_norm_2d_add_relu_eval_backward", "dy y x", {}, (False, True)),
        ("batch_norm_2d_forward", "x", train, (False, True)),
        ("batch_norm_2d_backward", "dy x", train, (False, True)),
        ("batch_norm_2d_act_forward", "x", relu, (False, True)),
        ("batch_norm_2d_act_backward", "dy x", relu, (False, True)),
        ("batch_norm_2d_add_relu_forward", "x residual", {}, (False, True)),
        ("batch_norm_2d_add_relu_backward", "dy y x", {}, (False, True)),
    ]
    for name, big, scalars, layouts in calls:
        op = getattr(ops, name).op
        for channels_last in layouts:
            served = 0
            for b, c, h, w in shapes:
                nhwc = np.zeros((b, h, w, c), np.float32).transpose(0, 3, 1, 2)  # channels_last, viewed as NCHW
                full = nhwc if channels_last else np.zeros((b, c, h, w), np.float32)
                named = [full if i.name in big.split() else np.ones(c, np.float32) for i in op.inputs]
                values = tuple(scalars.get(s.name, s.default) for s in op.scalars)
                _, problem = op.problem(tuple(named), values, "host")
                placement = Placement(16, h200.sms)
                candidates = op.candidates(problem, placement)
                names = [tuning.entry_name(tuning.key(problem, placement, h200), p, h200.arch) for p in candidates]
                newer = tuning.newer_than_table(candidates, names, h200)  # left out, not timed: checked below
                if all(n in tuning.shipped(h200.slug) for i, n in enumerate(names) if i not in newer):
                    assert tuning.choose(candidates, problem, placement, 0, 0, never) is not None
                    served += 1
            assert served >= 30, f"{name} ({channels_last=}): the shipped table serves {served} of {len(shapes)} keys"


class FakeDriver:
    """cuda.bindings.driver as time_plans uses it: events read a clock that each launch advances by its plan's
    duration (ms), memsets (the L2 flush) advance it too. Between cuStreamBeginCapture and cuStreamEndCapture the
    stream's work (flushes, event records, `launch`es) is kept as a graph, which each cuGraphLaunch runs; as the
    real driver, it refuses to capture the legacy default stream."""

    class CUresult:
        CUDA_SUCCESS = 0
        CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900

    class CUstreamCaptureMode:
        CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1

    class CUevent_record_flags:
        CU_EVENT_RECORD_EXTERNAL = 1

    def __init__(self):
        self.clock, self.log, self.live, self.graph = 0.0, [], 0, None

    def _do(self, work):
        """Runs (or, while capturing, keeps) a piece of stream work: ("flush",), ("event", e), ("kernel", label, ms)."""
        if self.graph is not None:
            self.graph.append(work)
        elif work[0] == "event":
            work[1]["t"] = self.clock
        else:
            self.log.append(work[-2] if work[0] == "kernel" else "flush")
            self.clock += work[-1] if work[0] == "kernel" else 0.5

    def launch(self, label, ms):
        self._do(("kernel", label, ms))

    def CUstream(self, handle):
        return handle

    def cuEventCreate(self, flags):
        self.live += 1
        return 0, {"t": None}

    def cuEventDestroy(self, event):
        self.live -= 1
        return (0,)

    def cuEventRecord(self, event, stream):
        assert self.graph is None, "a plain event record while capturing is no graph node"
        self._do(("event", event))
        return (0,)

    def cuEventRecordWithFlags(self, event, stream, flags):
        assert self.graph is not None, "CU_EVENT_RECORD_EXTERNAL is invalid outside capture"
        self._do(("event", event))
        return (0,)

    def cuEventSynchronize(self, event):
        return (0,)

    def cuStreamSynchronize(self, stream):
        return (0,)

    def cuEventElapsedTime(self, start, end):
        return 0, end["t"] - start["t"]

    def cuMemsetD8Async(self, pointer, value, nbytes, stream):
        self._do(("flush",))
        return (0,)

    def cuStreamBeginCapture(self, stream, mode):
        if stream in (0, 1):
            return (self.CUresult.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,)
        self.graph = []
        return (0,)

    def cuStreamEndCapture(self, stream):
        graph, self.graph = self.graph, None
        self.live += 1
        return 0, graph

    def cuGraphInstantiate(self, graph, flags):
        self.live += 1
        return 0, graph

    def cuGraphLaunch(self, graph, stream):
        self.log.append("graph")
        for work in graph:
            self._do(work)
        return (0,)

    def cuGraphExecDestroy(self, executable):
        self.live -= 1
        return (0,)

    def cuGraphDestroy(self, graph):
        self.live -= 1
        return (0,)


class UncapturingDriver(FakeDriver):
    """A driver that refuses graph capture: the repetitions are issued as they are."""

    def cuStreamBeginCapture(self, stream, mode):
        return (1,)


def test_time_plans_interleaves_flushed_repetitions_and_drops_a_failing_plan(monkeypatch):
    """Where graphs cannot be captured, each repetition issues the plan's launches (their median counts)."""
    fake = UncapturingDriver()
    monkeypatch.setattr(tuning.driver, "driver_module", lambda: fake)
    monkeypatch.setattr(tuning, "_flush_buffer", lambda info: (1, 2 * info.l2_bytes))
    candidates = plans()[:3]
    durations = {candidates[0].label: [0.010] * 8, candidates[2].label: [0.030, 0.020, 0.005, 0.020, 0.020, 0.9, 0.02,
                                                                         0.02]}  # fmt: skip

    def launch(plan):
        if plan is candidates[1]:
            raise tuning.driver.LaunchError("launch refused: too many resources requested")
        fake.launch(plan.label, durations[plan.label].pop(0))

    out = tuning.time_plans(candidates, launch, USER_STREAM, GPU)
    assert out[0] == (pytest.approx(10.0), "")
    assert out[1][0] is None and "too many resources" in out[1][1]
    assert out[2][0] == pytest.approx(20.0)  # the median, not the warm-up's 30 nor the outlier 900
    timed = fake.log[2:]  # after the two warm-ups: flush, a, flush, c, ... interleaved
    assert timed[:4] == ["flush", candidates[0].label, "flush", candidates[2].label]
    assert len(timed) == 4 * tuning.MAX_REPS
    assert fake.live == 0  # every event destroyed
    assert tuning.issued_directly == tuning.MAX_REPS  # counted: their times hold host time


def test_time_plans_captures_each_repetition_into_one_graph(monkeypatch):
    """Each repetition (every candidate's flush, start event, launches, end event) is captured after the warm-ups
    and launched as one graph: its events time the launches back to back, with no host time between them. Every
    graph and event is destroyed."""
    fake = FakeDriver()
    monkeypatch.setattr(tuning.driver, "driver_module", lambda: fake)
    monkeypatch.setattr(tuning, "_flush_buffer", lambda info: (1, 2 * info.l2_bytes))
    candidates = plans()[:2]
    first, second = (c.label for c in candidates)
    durations = {first: 0.004, second: 0.002}

    def launch(plan):
        for _ in range(2):  # two launches a plan
            fake.launch(plan.label, durations[plan.label] / 2)

    out = tuning.time_plans(candidates, launch, USER_STREAM, GPU)
    assert out == [(pytest.approx(4.0), ""), (pytest.approx(2.0), "")]
    reps = fake.log[4:]  # after the warm-ups (two launches each): one graph per repetition
    assert reps[:6] == ["graph", "flush", first, first, "flush", second]
    assert reps.count("graph") == tuning.MAX_REPS and "flush" not in fake.log[:4]
    assert fake.live == 0 and tuning.issued_directly == 0


def test_an_unwritable_cache_costs_a_saved_entry_not_the_call(monkeypatch):
    candidates = plans()
    monkeypatch.setattr(tuning, "time_plans", Timer({candidates[1].label: 1.0}))

    def full(path, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tuning.kcache, "write_atomic", full)
    assert choose(candidates) == candidates[1]  # chosen, kept in this process
    assert tuning.entries(GPU) == {}


def test_the_sync_ops_list_their_splits_and_grids_and_every_candidate_gives_the_rules_results():
    """SyncBatchNorm's per-rank ops: candidates around the rule's split or grid, each with results within rounding
    of the rule's plan's in the emulator."""
    from rust_kernels.families.batch_norm import sync

    rng = np.random.default_rng(3)
    shape = (4, 16, 6, 6)
    x = rng.standard_normal(shape).astype(np.float32)
    p = Problem(shape, "f32", "f32", {}, {}, None)
    for op, args in ((sync.MOMENTS, (x,)), (sync.NORMALIZE, (x, *(rng.uniform(0.5, 1.5, 16).astype(np.float32)
                                                                   for _ in range(4))))):  # fmt: skip
        candidates = op.candidates(p, Placement(16, 132))
        assert candidates[0] == op.choose(p, Placement(16, 132)) and len(candidates) >= 2

        def run(plan, op=op, args=args):
            out = op(*args, backend="host", plan=plan)
            return out if isinstance(out, tuple) else (out,)

        own = run(candidates[0])
        for plan in candidates[1:]:
            for a, b in zip(run(plan), own, strict=True):
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=plan.label)


@pytest.fixture
def merge_script():
    """scripts/merge_tuning_table.py as a module."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "scripts" / "merge_tuning_table.py"
    spec = importlib.util.spec_from_file_location("merge_tuning_table", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_the_table_merge_script_names_the_candidates_of_ops_with_other_full_size_inputs(merge_script):
    """The add + ReLU ops take [B, C, H, W] arrays besides x and dy (residual, y): their entries are current too
    (the script once built those as [C] vectors, the ops refused them, and every add + ReLU entry was dropped)."""
    from rust_kernels import ops

    h200 = tuning.Gpu("NVIDIA H200", 132, "sm_90", 0)
    full = np.zeros((2, 4, 4, 8), np.float32).transpose(0, 3, 1, 2)  # channels_last, viewed as NCHW
    c = np.ones(8, np.float32)
    placement = Placement(16, 132)
    for op, arrays in ((ops.batch_norm_2d_add_relu_forward.op, (full, full, c, c, c, c)),
                       (ops.batch_norm_2d_add_relu_backward.op, (full, full, full, c, c, c))):  # fmt: skip
        values = tuple(s.default for s in op.scalars)
        _, problem = op.problem(arrays, values, "host")
        key = tuning.key(problem, placement, h200)
        names = {tuning.entry_name(key, p, h200.arch) for p in op.candidates(problem, placement)}
        assert len(names) >= 2 and names <= merge_script.current_names(key, h200), op.name


def test_the_carry_names_kernels_by_the_sources_of_the_commit_it_carries_from(merge_script):
    """--carry-from computes each kernel's old source key in a worktree of that commit, with that commit's templates
    and specs (a template change renames every instance of its specs, the unchanged PTX of most of them carries): at
    HEAD, for kernels this checkout has not changed since, the keys builder.source_key gives here; None for a kernel
    HEAD has no such instance of."""
    import subprocess

    from rust_kernels import builder
    from rust_kernels.kernels import BatchNorm2dBatchStats, RmsNormForward  # type: ignore[attr-defined]

    root = Path(merge_script.__file__).resolve().parents[1]
    changed = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "codegen", "rust_kernels"],
                             capture_output=True, text=True, check=True).stdout  # fmt: skip
    if changed:
        pytest.skip(f"the checkout's kernel sources differ from HEAD's: {changed.splitlines()[0]}")
    kernels = [BatchNorm2dBatchStats(256, 1, 1, dtype="bf16", param_dtype="f32"), RmsNormForward(256, dtype="f32")]
    ids = [k.id for k in kernels] + ["batch_norm_2d_batch_stats__f32__256__9__9"]
    keys = merge_script.source_keys_at("HEAD", "sm_90", ids)
    assert [keys[k.id] for k in kernels] == [builder.source_key(k, "sm_90") for k in kernels]
    assert keys[ids[-1]] is None


@pytest.mark.parametrize("activation", ["relu", "silu", "relu6", "hardswish"])
def test_the_table_merge_script_names_the_entries_of_every_activation(merge_script, activation):
    """An export of `tune --activation` keeps its entries in a merge: the script asks the ops for their plans with
    every activation (Hardswish's were unnamed, so dropped, until 12-07)."""
    from rust_kernels import ops

    h200 = tuning.Gpu("NVIDIA H200", 132, "sm_90", 0)
    x, c = np.zeros((2, 16, 4, 4), np.float32), np.ones(16, np.float32)
    op = ops.batch_norm_2d_act_eval_forward.op
    _, problem = op.problem((x, c, c, c, c), (1e-5, activation), "host")
    placement = Placement(16, 132)
    key = tuning.key(problem, placement, h200)
    names = {tuning.entry_name(key, plan, h200.arch) for plan in op.candidates(problem, placement)}
    assert names and names <= merge_script.current_names(key, h200)


def test_the_table_merge_script_keeps_current_entries_and_drops_those_no_candidate_names(tmp_path, capsys,
                                                                                      merge_script):  # fmt: skip
    """scripts/merge_tuning_table.py: an exported table's entries merge in (a later time replaces an earlier one of
    the same name), and an entry whose kernels changed since (no current candidate names it) is dropped; with
    --fresh the exports' entries alone are kept."""
    from rust_kernels import ops

    script = merge_script
    h200 = tuning.Gpu("NVIDIA H200", 132, "sm_90", 0)
    x = np.zeros((2, 16, 4, 4), np.float32)
    c = np.ones(16, np.float32)
    op = ops.batch_norm_2d_forward.op
    _, problem = op.problem((x, c, c, c, c), (True, 0.1, 1e-5), "host")
    placement = Placement(16, 132)
    key = tuning.key(problem, placement, h200)
    first, second = op.candidates(problem, placement)[:2]
    names = [tuning.entry_name(key, p, h200.arch) for p in (first, second)]
    assert set(names) <= script.current_names(key, h200)

    def entry(plan_label, us):
        return {"us": us, "plan": plan_label, "key": key, "reason": ""}

    stale = entry("batch_norm_2d_batch_stats__f32__old", 1.0)
    table = {"gpu": h200.name, "sms": 132, "entries": {names[0]: entry(first.label, 5.0), "f" * 40: stale}}
    exported = {"gpu": h200.name, "sms": 132, "entries": {names[0]: entry(first.label, 4.0),
                                                          names[1]: entry(second.label, 6.0)}}  # fmt: skip
    script.write_table(tmp_path / "table.json.gz", table)
    script.write_table(tmp_path / "new.json.gz", exported)
    assert script.main([str(tmp_path / "new.json.gz"), "--table", str(tmp_path / "table.json.gz")]) == 0
    kept = script.read(tmp_path / "table.json.gz")["entries"]
    assert set(kept) == set(names) and kept[names[0]]["us"] == 4.0
    assert "dropped 1: {'batch_norm_2d_batch_stats': 1}" in capsys.readouterr().out
    script.write_table(tmp_path / "only.json.gz", {"gpu": h200.name, "sms": 132, "entries": {names[1]: entry(
        second.label, 7.0)}})  # fmt: skip
    assert script.main(["--fresh", str(tmp_path / "only.json.gz"), "--table", str(tmp_path / "table.json.gz")]) == 0
    assert script.read(tmp_path / "table.json.gz")["entries"] == {names[1]: entry(second.label, 7.0)}


def test_the_table_merge_script_leaves_a_table_no_candidate_names_as_it_was(tmp_path, capsys, merge_script):
    """Every entry stale at once is the sign of a change to the sources every kernel's key includes, not of kernels
    changed one by one: the table is kept and --carry-from is named."""
    stale = {
        "us": 1.0,
        "plan": "batch_norm_2d_batch_stats__f32__old",
        "reason": "",
        "key": json.dumps([[2, 16, 4, 4], "f32", None, 16, "NVIDIA H200", 132]),
    }
    table = tmp_path / "table.json.gz"
    merge_script.write_table(table, {"gpu": "NVIDIA H200", "sms": 132, "entries": {"f" * 40: stale}})
    before = table.read_bytes()
    assert merge_script.main(["--table", str(table)]) == 1
    assert table.read_bytes() == before
    assert "--carry-from" in capsys.readouterr().err
