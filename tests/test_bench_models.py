"""The model benchmark (`bench --models`) on the CPU: the BN-freezing helper, the gradient comparison, the kernel
matching and shares, the alternating step timer, the table and CSV rows, the per-cell failure path, the command line,
and a dry run of whole cells with small models and a stand-in for rust_kernels.torch.convert. One GPU test runs a
small plan for real (graphs and profiles included)."""

from __future__ import annotations

import csv
import math
import sys
import types
from dataclasses import replace
from typing import Any

import pytest

from rust_kernels import bench
from rust_kernels.bench import launch, models, ops
from rust_kernels.bench.models import Cell, GradCheck, KernelTimes, ModelResult, Plan

torch = pytest.importorskip("torch")
nn = torch.nn


# --- stand-ins for rust_kernels.torch ---------------------------------------------------------------------------------
class FakeBatchNorm2d(nn.BatchNorm2d):
    """Eval-mode BN computed another way (scale and shift first), as our kernel would: the same function, other
    rounding. Training mode is torch's."""

    def forward(self, x: Any) -> Any:
        if self.training:
            return super().forward(x)
        scale = self.weight * torch.rsqrt(self.running_var + self.eps)
        shift = self.bias - self.running_mean * scale
        return (x * scale[None, :, None, None] + shift[None, :, None, None]).to(x.dtype)


class WrongBatchNorm2d(nn.BatchNorm2d):
    """A BN that is 1% off in eval mode: its gradients must be flagged."""

    def forward(self, x: Any) -> Any:
        return super().forward(x) * (1.01 if not self.training else 1.0)


def swap(cls: type) -> models.Convert:
    def convert(model: Any) -> Any:
        for m in model.modules():
            if type(m) is nn.BatchNorm2d:
                m.__class__ = cls  # in place: same parameters, buffers and state_dict
        return model

    return convert


fake_convert = swap(FakeBatchNorm2d)


class Small(nn.Module):
    """Conv-BN-ReLU twice, dropout and a linear head: small enough for many CPU steps."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1, bias=False),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.head = nn.Sequential(nn.Dropout(0.5), nn.Linear(16, classes))

    def forward(self, x: Any) -> Any:
        return self.head(self.features(x))


def build_small(torch_: Any, name: str, classes: int) -> Any:
    if name != "small":
        raise ValueError(f"Unknown model {name}")
    return Small(classes)


SMALL_PLAN = Plan(models=["small"], batches=[4], dtypes=["f32"], modes=["eager"], steps=5, warmup=1, image=8,
                  classes=10, calibration=(2, 8))  # fmt: skip


# --- freezing BN -----------------------------------------------------------------------------------------------------
def test_freezing_puts_exactly_the_batch_norms_in_eval_with_trainable_affine_parameters():
    model = Small()
    for bn in models.batch_norms(torch, model):
        bn.weight.requires_grad_(False)  # freezing must make them trainable again
    model.eval()
    norms = models.freeze_batchnorm(torch, model)
    assert norms == [model.features[1], model.features[4]]
    for m in model.modules():
        assert m.training is not isinstance(m, nn.BatchNorm2d), m
    assert all(p.requires_grad for p in model.parameters())
    before = [(bn.running_mean.clone(), bn.running_var.clone(), int(bn.num_batches_tracked)) for bn in norms]
    model(torch.randn(4, 3, 8, 8) * 3 + 1).sum().backward()
    for bn, (mean, var, tracked) in zip(norms, before, strict=True):
        assert torch.equal(bn.running_mean, mean) and torch.equal(bn.running_var, var)  # used, not updated
        assert int(bn.num_batches_tracked) == tracked
        assert bn.weight.grad is not None and bn.bias.grad is not None
    assert model.head[1].weight.grad is not None


def test_freezing_counts_our_subclass_as_batch_norm():
    model = fake_convert(Small())
    norms = models.freeze_batchnorm(torch, model)
    assert len(norms) == 2 and all(type(bn) is FakeBatchNorm2d and not bn.training for bn in norms)


def test_calibration_gives_the_statistics_of_the_data_and_keeps_the_momentum():
    model = Small()
    models.calibrate(torch, model, torch.device("cpu"), batches=2, images=8, image=8)
    first = model.features[1]
    assert first.momentum == 0.1 and int(first.num_batches_tracked) == 2
    assert not torch.allclose(first.running_var, torch.ones(8))  # no longer the fresh statistics
    model.features[1].eval()
    x = torch.randn(8, 3, 8, 8)
    y = model.features[1](model.features[0](x))
    assert y.mean().abs() < 0.5 and 0.3 < y.var() < 3  # normalised, roughly


@pytest.mark.parametrize(("dtype", "activations"), [("f32", "float32"), ("bf16", "bfloat16")])
def test_a_step_runs_under_autocast_in_bf16_with_f32_master_weights(dtype, activations):
    model = Small()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    x, y = models.make_inputs(torch, torch.device("cpu"), 4, 8, 10)
    side = models.Side(torch, model, state, x, y, dtype)
    seen = []
    model.features[0].register_forward_hook(lambda module, args, out: seen.append(out.dtype))
    before = model.head[1].weight.detach().clone()
    side.run()
    assert seen == [getattr(torch, activations)]
    assert all(p.dtype == torch.float32 and p.grad.dtype == torch.float32 for p in model.parameters())
    assert side.loss.dtype == torch.float32 and not torch.equal(model.head[1].weight, before)  # SGD stepped
    assert not model.features[1].training and model.head[0].training


def test_changed_statistics_are_found():
    model = Small()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    assert models.changed_statistics(torch, model, state) == []
    model.train()
    model(torch.randn(4, 3, 8, 8))  # BN in training mode updates its statistics
    assert models.changed_statistics(torch, model, state) == [f"features.{i}.running_{s}" for i in (1, 4)
                                                              for s in ("mean", "var")]  # fmt: skip


def test_a_bn_that_is_not_frozen_is_noted():
    class Unfrozen(FakeBatchNorm2d):
        def eval(self) -> Any:  # ignores eval: keeps training, so updates its statistics
            return self

    (r,) = models.run(torch, SMALL_PLAN, convert=swap(Unfrozen), device="cpu", build=build_small)
    assert any(n.startswith("ours: BN running statistics changed during the steps") for n in r.notes), r.notes
    assert not any(n.startswith("torch: BN running") for n in r.notes)


# --- gradients -------------------------------------------------------------------------------------------------------
def t(*values: float) -> Any:
    return torch.tensor(values)


def test_grad_errors_against_float64():
    ref = {"a": t(3, 4), "b": t(1, 0), "c": None, "d": t(0, 2)}
    got = {"a": t(3, 4.5), "b": t(1, 0), "c": None, "d": t(0, 2.02)}
    assert models.grad_errors(ref, got) == pytest.approx({"a": 0.1, "b": 0.0, "d": 0.01})  # "c": none on either side
    assert models.grad_errors(ref, got | {"c": t(1)})["c"] == math.inf  # a gradient on one side only
    assert models.grad_errors(ref, got | {"a": t(math.nan, 4)})["a"] == math.inf
    assert models.grad_errors({"x": t(0, 0)}, {"x": t(1, 0)}) == {"x": math.inf}
    assert models.grad_errors({"x": t(0, 0)}, {"x": t(0, 0)}) == {"x": 0.0}
    assert models.grad_errors({"x": t(1e-3, 0)}, {"x": t(1e-3, 0).half()})["x"] == pytest.approx(0, abs=1e-3)
    with pytest.raises(ValueError, match="parameters differ"):
        models.grad_errors(ref, {"a": t(3, 4)})
    with pytest.raises(ValueError, match="shapes differ"):
        models.grad_errors({"a": t(1, 2)}, {"a": t(1, 2, 3)})
    with pytest.raises(ValueError, match="no parameter"):
        models.grad_errors({"c": None}, {"c": None})


def test_a_vanishing_gradient_is_measured_against_the_models():
    """A float64 gradient at rounding level (none in exact arithmetic): its rounded gradients are noise, compared
    with the whole model's gradient norm, not their own."""
    ref = {"w": t(3, 4), "bias": t(1e-16, 0)}
    got = {"w": t(3, 4), "bias": t(1e-7, 0)}
    assert models.vanishing(ref) == ["bias"]
    assert models.grad_errors(ref, got)["bias"] == pytest.approx(1e-7 / 5)  # ||(3, 4, 1e-16)|| = 5
    assert models.grad_errors({"w": t(3, 4), "b": t(1e-9, 0)}, {"w": t(3, 4), "b": t(2e-9, 0)})["b"] == pytest.approx(1)


def test_ours_is_measured_by_torchs_error():
    check = models.check_grads({"a": t(3, 4), "b": t(0, 2)}, {"a": t(3, 4.5), "b": t(0, 2)},
                               {"a": t(3, 4), "b": t(0, 2.3)})  # fmt: skip
    assert check.torch == pytest.approx({"a": 0.1, "b": 0.0}) and check.ours == pytest.approx({"a": 0.0, "b": 0.15})
    assert check.worst_param == "b" and check.worst == pytest.approx(0.15) and check.torch_worst == pytest.approx(0.1)
    assert check.ok("f32") and not GradCheck({"a": 0.1}, {"a": 0.21}).ok("f32")
    # torch's error is taken as at least a rounding of the dtype: exact torch gradients do not fail rounded ours
    assert GradCheck({"a": 0.0}, {"a": 1e-7}).ok("f32") and not GradCheck({"a": 0.0}, {"a": 1e-6}).ok("f32")
    assert GradCheck({"a": 0.0}, {"a": 5e-3}).ok("bf16")
    assert models.grad_ratio(check) == "1.50" and models.grad_ratio(GradCheck({"a": 0.0}, {"a": 1e-9})) == "inf"


def test_dropping_nothing_sets_every_dropout_to_zero_and_back():
    model = nn.Sequential(nn.Dropout(0.5), nn.Dropout(0.2), nn.Linear(2, 2))
    with models.dropping_nothing(torch, model):
        assert [m.p for m in model[:2]] == [0.0, 0.0]
        assert torch.equal(model.train()(torch.ones(4, 2)), model[2](torch.ones(4, 2)))
    assert [m.p for m in model[:2]] == [0.5, 0.2]


# --- kernels ---------------------------------------------------------------------------------------------------------
CUDA, CPU = "CUDA", "CPU"


def event(name: str, us: float, device: str = CUDA, annotation: bool = False) -> Any:
    span = types.SimpleNamespace(elapsed_us=lambda: us)
    return types.SimpleNamespace(name=name, device_type=device, time_range=span, is_user_annotation=annotation)


def test_kernel_times_keep_device_activity_only():
    events = [
        event("void cudnn::bn_fw_inf_1C11_kernel_NCHW<float>", 10),
        event("void cudnn::bn_fw_inf_1C11_kernel_NCHW<float>", 12),
        event("sm90_xmma_fprop_implicit_gemm", 70),
        event("Memset (Device)", 3),
        event("aten::batch_norm", 500, CPU),  # the CPU op: its kernels are counted already
        event("ProfilerStep#1", 95, CUDA, annotation=True),  # a GPU-side range over the kernels
    ]
    us = models.kernel_times(events, CUDA)
    assert us == {"void cudnn::bn_fw_inf_1C11_kernel_NCHW<float>": 22, "sm90_xmma_fprop_implicit_gemm": 70,
                  "Memset (Device)": 3}  # fmt: skip


def test_bn_kernels_by_name_and_their_share():
    names = {
        "void cudnn::bn_bw_1C11_kernel_new<float, float>": True,
        "void at::native::batch_norm_backward_kernel<float>": True,
        "void at::native::elementwise_kernel<batch_norm_elementwise(...)>": True,
        "BatchNormForward": True,
        "batch_norm_2d_nchw_backward_split_entry_point": True,
        "sm90_xmma_dgrad_implicit_gemm": False,
        "void at::native::vectorized_elementwise_kernel<4, clamp_min>": False,
    }
    assert {n: models.is_bn_kernel(n) for n in names} == names
    assert models.is_ours_kernel("batch_norm_2d_nchw_forward_inference_entry_point")
    assert not models.is_ours_kernel("void cudnn::bn_bw_1C11_kernel_new<float, float>")
    k = KernelTimes({"cudnn::bn_fw_inf": 30.0, "batch_norm_backward": 10.0, "gemm": 160.0}, steps=2)
    assert k.total_us == 200 and k.bn_us == 40 and k.bn_share == pytest.approx(0.2)
    assert k.bn_ms == pytest.approx(0.02) and k.gpu_ms == pytest.approx(0.1)
    assert k.top(2) == [("gemm", 160.0), ("cudnn::bn_fw_inf", 30.0)]
    assert k.bn_names() == ["cudnn::bn_fw_inf", "batch_norm_backward"]
    none = KernelTimes({"gemm": 10.0}, steps=1)
    assert none.bn_share is None and none.bn_ms is None  # no match: n/a, not 0 %


# --- timing ----------------------------------------------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_time_steps_alternates_blocks_and_drops_a_failing_side():
    clock, order, syncs = Clock(), [], []

    def side(name: str, ms: float, fail_at: int | None = None) -> Any:
        def run() -> None:
            order.append(name)
            if fail_at is not None and order.count(name) == fail_at:
                raise RuntimeError("CUDA error: an illegal memory access was encountered")
            clock.now += ms / 1e3

        return run

    timed = models.time_steps(
        {"torch": side("torch", 2.0), "ours": side("ours", 1.0)},
        steps=7, block=3, event=lambda: models.HostEvent(clock), sync=lambda: syncs.append(len(order)), clock=clock,
    )  # fmt: skip
    assert order == ["torch"] * 3 + ["ours"] * 3 + ["torch"] * 3 + ["ours"] * 3 + ["torch", "ours"]
    assert syncs == [0, 3, 6, 9, 12, 13]  # before every block
    assert len(timed.gpu["torch"]) == 7 and len(timed.host["torch"]) == 3  # the blocks' first steps
    assert timed.median("torch") == pytest.approx(2.0) and timed.median("ours") == pytest.approx(1.0)
    assert timed.host_median("ours") == pytest.approx(1.0) and not timed.errors
    order.clear()
    timed = models.time_steps(
        {"torch": side("torch", 2.0), "ours": side("ours", 1.0, fail_at=2)},
        steps=4, block=2, event=lambda: models.HostEvent(clock), sync=lambda: None, clock=clock,
    )  # fmt: skip
    assert order == ["torch", "torch", "ours", "ours", "torch", "torch"]
    assert timed.median("torch") == pytest.approx(2.0) and timed.median("ours") is None
    assert timed.errors == {"ours": "RuntimeError: CUDA error: an illegal memory access was encountered"}


def test_reason_names_the_error_it_happened_during():
    try:
        try:
            raise RuntimeError("operation not permitted when stream is capturing\nmore")
        except RuntimeError:
            raise RuntimeError("capture_end failed") from None
    except RuntimeError as err:
        assert models.reason(err) == "RuntimeError: capture_end failed"
    try:
        try:
            raise KeyError("nope")
        except KeyError:
            raise ValueError("Unknown model nope")  # noqa: B904
    except ValueError as err:
        assert models.reason(err) == "ValueError: Unknown model nope (during KeyError: 'nope')"


# --- rows, CSV, tables -----------------------------------------------------------------------------------------------
def result(mode: str = "eager", dtype: str = "f32", torch_ms: float | None = 30.0, ours_ms: float | None = 25.0,
           worst: float = 2e-6, **kw: Any) -> ModelResult:  # fmt: skip
    r = ModelResult(Cell("resnet50", 64, dtype, mode), **kw)
    r.ms |= {"torch": torch_ms, "ours": ours_ms}
    r.host_ms |= {"torch": 4.0, "ours": 5.5}
    r.steps |= {"torch": 20, "ours": 20}
    r.grads = GradCheck({"conv1.weight": 2e-6, "layer4.2.bn3.weight": 1e-6}, {"conv1.weight": worst / 2,
                        "layer4.2.bn3.weight": worst}, vanishing=1)  # fmt: skip
    r.kernels = {
        "torch": KernelTimes({"cudnn::bn_fw_inf": 3000.0, "gemm": 9000.0}, steps=2),
        "ours": KernelTimes({"batch_norm_2d_nchw_forward_inference_entry_point": 1000.0, "gemm": 9000.0}, steps=2),
    }
    r.seconds = 7.25
    return r


def test_result_figures():
    r = result()
    assert r.speedup == pytest.approx(1.2) and r.grads_ok is True
    assert r.bn_share("torch") == pytest.approx(0.25) and r.bn_ms("ours") == pytest.approx(0.5)
    assert r.gpu_ms("torch") == pytest.approx(6.0)
    assert result(worst=4e-6).grads_ok is True and result(worst=4.1e-6).grads_ok is False  # 2x torch's 2e-6
    assert result(dtype="bf16", worst=7e-3).grads_ok is True  # torch's error taken as one bf16 rounding at least
    bare = models.failed(Cell("resnet50", 64, "f32", "graph"), "model: OutOfMemoryError: CUDA out of memory")
    assert bare.speedup is None and bare.grads_ok is None and bare.bn_share("torch") is None


def test_csv_rows_and_files(tmp_path):
    row = models.csv_row(result())
    assert row["model"] == "resnet50" and row["batch"] == "64" and row["mode"] == "eager"
    assert row["torch_ms"] == "30.000" and row["ours_ms"] == "25.000" and row["speedup_vs_torch"] == "1.2000"
    assert row["torch_host_ms"] == "4.000" and row["ours_steps"] == "20"
    assert row["grad_err_torch"] == "2.000e-06" and row["grad_err_ours"] == "2.000e-06"
    assert row["grad_worst_param"] == "layer4.2.bn3.weight" and row["grad_params"] == "2"
    assert row["grad_vanishing"] == "1" and row["grad_within_target"] == "yes"
    assert row["bn_share_torch"] == "0.2500" and row["bn_ms_torch"] == "1.500" and row["gpu_ms_ours"] == "5.000"
    assert row["seconds"] == "7.2" and row["note"] == ""
    assert set(row) == set(models.MODEL_FIELDS)
    bf16 = models.csv_row(result(dtype="bf16", worst=0.25))
    assert bf16["grad_err_ours"] == "2.500e-01" and bf16["grad_within_target"] == "no"
    assert models.csv_row(models.failed(Cell("resnet50", 64, "f32", "graph"), "no"))["grad_within_target"] == ""
    na = models.csv_row(result(ours_ms=None, notes=["ours: RuntimeError: capture failed"]))
    assert na["ours_ms"] == "n/a" and na["speedup_vs_torch"] == "n/a"
    assert na["note"] == "ours: RuntimeError: capture failed"
    results = [result(), result(mode="graph"), result(dtype="bf16")]
    models.write_csv(results, tmp_path / "models.csv")
    rows = list(csv.DictReader((tmp_path / "models.csv").open()))
    assert [(r["dtype"], r["mode"]) for r in rows] == [("f32", "eager"), ("f32", "graph"), ("bf16", "eager")]
    models.write_kernels_csv(results, tmp_path / "kernels.csv")
    kernels = list(csv.DictReader((tmp_path / "kernels.csv").open()))
    # each (model, batch, dtype) and side once: the graph row shares the eager row's profile
    assert len(kernels) == 2 * 2 * 2
    first = kernels[0]
    assert (first["side"], first["kernel"], first["us_per_step"], first["bn"]) == ("torch", "gemm", "4500.000", "no")
    ours_bn = [k for k in kernels if k["ours"] == "yes"]
    assert len(ours_bn) == 2 and all(k["bn"] == "yes" for k in ours_bn)


def test_table_summary_and_kernel_lists(capsys):
    results = [result(), result(mode="graph", ours_ms=40.0), result(dtype="bf16", worst=0.04),
               result(worst=3e-5, torch_ms=None, notes=["torch: OutOfMemoryError: CUDA out of memory"])]  # fmt: skip
    models.print_table(results)
    models.print_summary(results)
    models.print_summary([result(), models.failed(Cell("resnet50", 64, "f32", "graph"), "model: no")])
    models.print_kernels(results, top=2)
    printed = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(printed) if line.startswith("model "))
    rows = printed[header + 1 : header + 5]
    assert rows[0].split() == ["resnet50", "64", "f32", "eager", "30.00", "25.00", "1.20x", "4.00", "5.50",
                               "1.00", "25.0%", "1.50", "0.50", "7"]  # fmt: skip
    assert rows[1].split()[6] == "0.75x" and rows[3].split()[4:7] == ["n/a", "25.00", "n/a"]
    assert len({len(line) for line in printed[header : header + 5]}) == 1  # aligned
    text = "\n".join(printed)
    assert "n/a in resnet50 B=64 f32 eager: torch: OutOfMemoryError: CUDA out of memory" in text
    assert "ours vs torch >= 1.00x in 2 of 4 cells (1 n/a)" in text
    assert "  below: resnet50 B=64 f32 graph 0.75x" in text
    assert "gradients against float64, ours' worst error within 2x torch's: 2 of 4 cells compared" in text
    assert "over: resnet50 B=64 f32 eager ours 3.00e-05 (layer4.2.bn3.weight), torch 2.00e-06" in text
    assert "over: resnet50 B=64 bf16 eager ours 4.00e-02 (layer4.2.bn3.weight), torch 2.00e-06" in text
    assert "within 2x torch's: 1 of 1 cells compared (1 n/a)" in text
    assert "top kernels, torch, resnet50 B=64 f32" in text and "top kernels, ours, resnet50 B=64 bf16" in text
    assert text.count("top kernels,") == 4  # once per (model, dtype) and side
    assert "[BN][ours]" in text and "kernels counted as BN, torch" in text


# --- whole cells on the CPU ------------------------------------------------------------------------------------------
def test_a_cell_on_the_cpu_times_both_sides_and_compares_their_gradients(capsys):
    (r,) = models.run(torch, SMALL_PLAN, convert=fake_convert, device="cpu", build=build_small)
    assert r.ms["torch"] > 0 and r.ms["ours"] > 0 and r.steps == {"torch": 5, "ours": 5}
    assert r.host_ms["torch"] > 0
    # against float64: both sides' f32 rounding, ours no more than twice torch's
    assert r.grads is not None and 0 < r.grads.torch_worst < 1e-5 and len(r.grads.ours) == 8 and r.grads_ok
    assert r.notes == ["BN share n/a: the profile needs a CUDA device"]
    assert "small B=4 f32 eager: torch" in capsys.readouterr().out


def test_wrong_gradients_are_flagged():
    (r,) = models.run(torch, SMALL_PLAN, convert=swap(WrongBatchNorm2d), device="cpu", build=build_small)
    assert r.grads is not None and r.grads.worst > 1e-3 > 1e-5 > r.grads.torch_worst and r.grads_ok is False


def test_failures_stay_in_their_cell():
    plan = Plan(models=["small", "broken"], batches=[2], dtypes=["f32"], modes=["eager", "graph"], steps=5,
                warmup=1, profile_steps=0, image=8, classes=10, calibration=(1, 4))  # fmt: skip

    def bad_convert(model: Any) -> Any:
        raise RuntimeError("no kernel for this GPU")

    results = models.run(torch, plan, convert=bad_convert, device="cpu", build=build_small)
    assert [r.cell.label() for r in results] == ["small B=2 f32 eager", "small B=2 f32 graph", "broken B=2 f32 eager",
                                                 "broken B=2 f32 graph"]  # fmt: skip
    eager, graph, broken, _ = results
    assert eager.ms["torch"] > 0 and eager.ms["ours"] is None and eager.grads is None
    assert eager.notes == ["ours: convert: RuntimeError: no kernel for this GPU"]
    assert graph.ms["torch"] is None and "torch: RuntimeError: CUDA graphs need a CUDA device" in graph.notes
    assert broken.ms == {"torch": None, "ours": None} and broken.notes == ["model: ValueError: Unknown model broken"]


def test_a_side_failing_in_its_steps_leaves_the_other_timed(monkeypatch):
    class Failing(FakeBatchNorm2d):
        calls = 0

        def forward(self, x: Any) -> Any:
            Failing.calls += 1
            if Failing.calls > 6:  # past the warm-up and the gradient step (2 BN calls a step)
                raise RuntimeError("launch failed")
            return super().forward(x)

    Failing.calls = 0
    (r,) = models.run(torch, SMALL_PLAN, convert=swap(Failing), device="cpu", build=build_small)
    assert r.grads is not None and r.ms["torch"] > 0 and r.ms["ours"] is None
    assert "ours timing: RuntimeError: launch failed" in r.notes


def test_without_rust_kernels_torch_ours_is_na_everywhere(monkeypatch):
    monkeypatch.setitem(sys.modules, "rust_kernels.torch", None)  # import fails
    convert, why = models.load_convert()
    assert convert is None and why is not None and why.startswith("rust_kernels.torch.convert is not available")
    (r,) = models.run(torch, SMALL_PLAN, device="cpu", build=build_small)
    assert r.ms["torch"] > 0 and r.ms["ours"] is None and r.notes[0] == f"ours: {why}"


def test_past_the_budget_nothing_more_begins(monkeypatch):
    plan = Plan(models=["small"], batches=[2, 4], dtypes=["f32"], modes=["eager"], steps=5, warmup=1, image=8,
                classes=10, calibration=(1, 4), budget_s=1e-9)  # fmt: skip
    results = models.run(torch, plan, convert=fake_convert, device="cpu", build=build_small)
    assert len(results) == 2 and all(r.ms == {"torch": None, "ours": None} for r in results)
    assert results[0].notes[0].startswith("skipped: the run is over its time budget")
    runner = models.Runner(torch, replace(plan, budget_s=3600), fake_convert, "cpu", build_small)
    assert runner.over_budget() is None
    first = runner.run_group("small", 2, "f32")
    runner.deadline = 0.0  # the budget runs out during the first group
    second = runner.run_group("small", 4, "f32")
    assert first[0].ms["ours"] is not None and second[0].ms["ours"] is None and "budget" in second[0].notes[0]


def test_convert_leaving_torch_modules_is_noted():
    model, note = models.converted(torch, Small(), lambda m: m)
    assert note == "ours: convert left 2 of 2 BatchNorm2d as torch's"
    model, note = models.converted(torch, Small(), fake_convert)
    assert note is None and sum(type(m) is FakeBatchNorm2d for m in model.modules()) == 2


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2"])
def test_dry_run_of_torchvision_models_on_the_cpu(name):
    pytest.importorskip("torchvision")
    plan = Plan(models=[name], batches=[2], dtypes=["f32", "bf16"], modes=["eager"], steps=2, warmup=1, image=32,
                classes=10, calibration=(1, 4))  # fmt: skip
    f32, bf16 = models.run(torch, plan, convert=fake_convert, device="cpu")
    for r in (f32, bf16):
        assert r.ms["torch"] > 0 and r.ms["ours"] > 0 and r.grads is not None, r.notes
    assert 0 < f32.grads.torch_worst < 1e-4 < bf16.grads.torch_worst and math.isfinite(bf16.grads.worst)
    # MobileNetV2 this small (1x1 maps) has one input of its last ReLU6 on the kink at 0: torch's BN and float64's
    # give exactly 0 there, the stand-in's x * scale + shift 1.6e-5, so ReLU6's gradient there is 1 instead of 0; an
    # error of 0.16 on that layer's parameters (torch's 3.5e-5), which the check reports
    assert f32.grads_ok is (name == "resnet18") and (name != "resnet18" or bf16.grads_ok)


# --- command line ----------------------------------------------------------------------------------------------------
def test_model_options():
    options = bench.parser().parse_args([])
    assert options.models is None  # the model benchmark runs only when asked
    options = bench.parser().parse_args(["--models"])
    plan = bench.model_plan(options)
    assert list(plan.models) == list(models.MODELS) and list(plan.batches) == [64, 256]
    assert list(plan.dtypes) == ["f32", "bf16"] and list(plan.modes) == ["eager", "graph"]
    assert plan.steps == models.STEPS and plan.profile_steps == models.PROFILE_STEPS and not options.no_tf32
    assert plan.budget_s == models.BUDGET_S
    argv = ["--models", "resnet50", "--batch", "32", "--dtype", "bf16", "f16", "--modes", "graph", "--steps", "10",
            "--warmup", "2", "--profile-steps", "0", "--no-tf32", "--budget", "0"]  # fmt: skip
    options = bench.parser().parse_args(argv)
    plan = bench.model_plan(options)
    assert list(plan.models) == ["resnet50"] and list(plan.batches) == [32] and list(plan.dtypes) == ["bf16"]
    assert list(plan.modes) == ["graph"] and (plan.steps, plan.warmup, plan.profile_steps) == (10, 2, 0)
    assert options.no_tf32 and plan.budget_s == 0
    for wrong in (["--batch", "0"], ["--modes", "compiled"], ["--steps", "4"], ["--profile-steps", "-1"]):
        with pytest.raises(SystemExit):
            bench.parser().parse_args(wrong)


def fake_torch() -> Any:
    cudnn = types.SimpleNamespace(allow_tf32=True, benchmark=False, deterministic=False)
    backends = types.SimpleNamespace(cudnn=cudnn, cuda=types.SimpleNamespace(matmul=types.SimpleNamespace(
        allow_tf32=False)))  # fmt: skip
    return types.SimpleNamespace(backends=backends, cuda=types.SimpleNamespace(get_device_name=lambda: "Fake GPU"),
                                 __version__="0.fake")  # fmt: skip


@pytest.mark.parametrize("ours_fails", [False, True])
def test_main_with_models_runs_only_the_model_benchmark(monkeypatch, tmp_path, ours_fails):
    fake = fake_torch()
    monkeypatch.setattr(bench, "unavailable", lambda: None)
    monkeypatch.setattr(models, "unavailable", lambda: None)
    monkeypatch.setitem(sys.modules, "torch", fake)

    def nope(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the op and launch benchmarks must not run with --models")

    monkeypatch.setattr(ops, "run", nope)
    monkeypatch.setattr(launch, "run", nope)
    seen: list[Plan] = []

    def run(torch_: Any, plan: Plan) -> list[ModelResult]:
        seen.append(plan)
        return [result(), result(mode="graph", ours_ms=None if ours_fails else 28.0)]

    monkeypatch.setattr(models, "run", run)
    out = tmp_path / "out"
    status = bench.main(["--models", "resnet50", "--batch", "64", "--dtype", "f32", "--no-tf32", "--out", str(out)])
    assert status == (1 if ours_fails else 0)
    assert seen[0].models == ["resnet50"] and fake.backends.cudnn.allow_tf32 is False
    rows = list(csv.DictReader((out / "models.csv").open()))
    assert [r["mode"] for r in rows] == ["eager", "graph"]
    assert (out / "models_kernels.csv").exists() and not (out / "bench.csv").exists()
    log = (out / "models.log").read_text()
    assert "device: Fake GPU" in log and "cudnn.allow_tf32 False" in log and "ours vs torch" in log
    assert ("ours could not be timed" in log) is ours_fails


def test_main_with_models_without_torchvision_says_why(monkeypatch, capsys):
    monkeypatch.setattr(bench, "unavailable", lambda: None)
    monkeypatch.setitem(sys.modules, "torchvision", None)
    assert bench.main(["--models"]) == 2
    assert "cannot run: torchvision is not installed" in capsys.readouterr().err


# --- on the GPU ------------------------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_a_small_plan_on_the_gpu(tmp_path):
    """Graph capture and replay, CUDA events, the profile and the gradient check against float64, with the stand-in
    convert (rust_kernels.torch itself is covered by its own tests and by `bench --models`)."""
    pytest.importorskip("torchvision")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    plan = Plan(models=["resnet18"], batches=[8], dtypes=["f32", "bf16"], modes=["eager", "graph"], steps=5,
                warmup=2, profile_steps=1, image=64, classes=10, calibration=(1, 8))  # fmt: skip
    results = models.run(torch, plan, convert=fake_convert)
    assert len(results) == 4
    for r in results:
        assert r.ms["torch"] > 0 and r.ms["ours"] > 0 and r.grads is not None, r.notes
        assert r.bn_share("torch") is not None and 0 < r.bn_share("torch") < 1, r.notes
    # the stand-in is torch's BN rounded otherwise: within GRAD_RATIO of torch's own error against float64
    assert all(r.grads_ok for r in results), [(r.cell.label(), r.grads) for r in results]


def test_fuse_runs_ours_through_convert_fuse_true(monkeypatch):
    """--fuse: ours is convert(model, fuse=True): both Conv-BN-ReLU pairs fused, trained in the emulator on CPU
    tensors, gradients as torch's."""
    import rust_kernels.torch as rk_torch

    made = []

    def convert(model: Any, fuse: bool = False) -> Any:
        made.append(rk_torch.convert(model, fuse=fuse))
        return made[-1]

    plan = replace(SMALL_PLAN, bn="train", fuse=True)
    (r,) = models.run(torch, plan, convert=convert, device="cpu", build=build_small)
    assert r.ms["ours"] is not None and r.grads is not None and r.grads_ok, (r.notes, r.grads)
    assert sum(isinstance(m, rk_torch.FusedBatchNorm2d) for m in made[0].modules()) == 2


def test_inference_runs_the_forward_alone_in_eval_mode_and_compares_the_logits(monkeypatch):
    """--bn eval: each side's model in eval mode, the forward under no_grad (no gradient, no optimizer step, the BN
    statistics untouched); the logits compared. With --fuse, ours runs the eval-mode fused kernels."""
    import rust_kernels.torch as rk_torch
    from rust_kernels.families.batch_norm import frozen_fused
    from rust_kernels.torch import library

    seen = []
    run_host = library.run_host
    monkeypatch.setattr(library, "run_host", lambda op, *a, **k: seen.append(op) or run_host(op, *a, **k))
    plan = replace(SMALL_PLAN, bn="eval", fuse=True)
    made = []

    def convert(model: Any, fuse: bool = False) -> Any:
        made.append(rk_torch.convert(model, fuse=fuse))
        return made[-1]

    (r,) = models.run(torch, plan, convert=convert, device="cpu", build=build_small)
    assert r.ms["torch"] > 0 and r.ms["ours"] > 0, r.notes
    assert r.grads is not None and list(r.grads.ours) == ["logits"] and r.grads_ok and r.grads.worst < 1e-5
    assert not any("statistics changed" in note for note in r.notes), r.notes
    assert not made[0].training and all(p.grad is None for p in made[0].parameters())
    assert frozen_fused.ACT_FORWARD in seen and frozen_fused.ACT_BACKWARD not in seen
