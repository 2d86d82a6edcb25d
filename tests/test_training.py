"""BatchNorm2d in training mode (batch statistics) in the host emulator: the torch-native ops on NumPy arrays in both
memory formats against float64 references over several steps, the failure modes of other stacks (E[x^2] - E[x]^2
cancelling at a large mean, half-precision sums overflowing), the errors, and on CPU tensors the operators (opcheck,
gradcheck, torch.compile tracing) and rust_kernels.torch.BatchNorm2d against torch.nn.BatchNorm2d."""

import copy

import ml_dtypes
import numpy as np
import pytest

from rust_kernels import ArgumentError, ops
from rust_kernels.dtypes import DTYPES
from rust_kernels.families.batch_norm import common

EPS = 1e-5


def channels_last(a: np.ndarray) -> np.ndarray:
    """The NHWC buffer of `a` behind its NCHW shape (what a channels_last tensor is)."""
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


def reference_forward(x, weight, bias, mean, var, momentum, eps=EPS):
    """float64: y, the batch mean and invstd, the running statistics after the update."""
    x = x.astype(np.float64)
    n = x.size // x.shape[1]
    m, v = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    c = (slice(None), None, None)
    y = (x - m[c]) / np.sqrt(v[c] + eps) * np.asarray(weight, np.float64)[c] + np.asarray(bias, np.float64)[c]
    new_mean = (1 - momentum) * np.asarray(mean, np.float64) + momentum * m
    new_var = (1 - momentum) * np.asarray(var, np.float64) + momentum * v * n / (n - 1)
    return y, m, 1 / np.sqrt(v + eps), new_mean, new_var


def reference_backward(dy, x, weight, mean, invstd):
    dy, x = dy.astype(np.float64), x.astype(np.float64)
    n = x.size // x.shape[1]
    c = (slice(None), None, None)
    mean, invstd, weight = (np.asarray(a, np.float64) for a in (mean, invstd, weight))
    s1, s2 = dy.sum(axis=(0, 2, 3)), (dy * (x - mean[c])).sum(axis=(0, 2, 3))
    dx = (weight * invstd)[c] * (dy - (s1 / n)[c] - (x - mean[c]) * (invstd**2 * s2 / n)[c])
    return dx, s2 * invstd, s1


def relative(got, want):
    want = np.asarray(want, np.float64)
    return float(np.max(np.abs(np.asarray(got, np.float64) - want)) / max(np.max(np.abs(want)), 1e-30))


@pytest.mark.parametrize("layout", ["nchw", "channels_last"])
@pytest.mark.parametrize("key", ["f64", "f32", "bf16-f32"])
def test_three_steps_match_float64_in_both_memory_formats(key, layout):
    act, par = (DTYPES[d].numpy_dtype() for d in common.split_key(key))
    rng = np.random.default_rng(1)
    shape = (3, 16, 5, 6)
    weight, bias = rng.uniform(0.5, 1.5, 16).astype(par), rng.standard_normal(16).astype(par)
    mean, var = np.zeros(16, par), np.ones(16, par)
    ref_mean, ref_var = mean.astype(np.float64), var.astype(np.float64)
    close = {"f64": 1e-13, "f32": 1e-5, "bf16-f32": 1e-2}[key]
    for step in range(3):
        x = (rng.standard_normal(shape) * 2 + step).astype(act)
        x = channels_last(x) if layout == "channels_last" else x
        y, save_mean, save_invstd = ops.batch_norm_2d_forward(x, weight, bias, mean, var, True, 0.1, EPS,
                                                              backend="host")  # fmt: skip
        want = reference_forward(x, weight, bias, ref_mean, ref_var, 0.1)
        ref_mean, ref_var = want[3], want[4]
        acc = DTYPES[common.split_key(key)[0]].acc_numpy
        assert y.strides == x.strides and save_mean.dtype == save_invstd.dtype == acc
        for got, expected in zip((y, save_mean, save_invstd, mean, var), want, strict=True):
            assert relative(got, expected) < close
    dy = rng.standard_normal(shape).astype(act)
    dy = channels_last(dy) if layout == "channels_last" else dy
    dx, dweight, dbias = ops.batch_norm_2d_backward(dy, x, weight, mean, var, save_mean, save_invstd, True, EPS,
                                                    backend="host")  # fmt: skip
    assert dx.strides == x.strides and dweight.dtype == dbias.dtype == par
    for got, expected in zip((dx, dweight, dbias), reference_backward(dy, x, weight, save_mean, save_invstd),
                             strict=True):  # fmt: skip
        assert relative(got, expected) < close


def test_a_mean_far_above_the_deviation_keeps_f32_precision():
    """Mean 1e4, std 1: E[x^2] - E[x]^2 would lose all 7 digits of f32; the shifted Welford merges keep them."""
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((4, 3, 16, 16)) + 1e4).astype(np.float32)
    ones, zeros = np.ones(3, np.float32), np.zeros(3, np.float32)
    for layout in (x, channels_last(x)):
        y, _, save_invstd = ops.batch_norm_2d_forward(layout, ones, zeros, zeros.copy(), ones.copy(), True,
                                                      backend="host")  # fmt: skip
        want = reference_forward(layout, ones, zeros, zeros, ones, 0.1)
        assert relative(save_invstd, want[2]) < 1e-5 and relative(y, want[0]) < 1e-4


def test_sixteen_bit_activations_with_large_sums_do_not_overflow():
    """f16 values near 1000 over 16 384 elements per channel: sums of 1.6e7 (f16 ends at 65 504) stay finite in the
    f32 accumulation, as do the backward's."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((4, 2, 64, 64)) * 50 + 1000).astype(np.float16)
    dy = (rng.standard_normal(x.shape) * 100 + 500).astype(np.float16)
    ones, zeros = np.ones(2, np.float32), np.zeros(2, np.float32)
    y, save_mean, save_invstd = ops.batch_norm_2d_forward(x, ones, zeros, zeros.copy(), ones.copy(), True,
                                                          backend="host")  # fmt: skip
    dx, dweight, dbias = ops.batch_norm_2d_backward(dy, x, ones, zeros, ones, save_mean, save_invstd, True,
                                                    backend="host")  # fmt: skip
    assert all(np.isfinite(a.astype(np.float64)).all() for a in (y, save_mean, save_invstd, dx, dweight, dbias))
    assert relative(dbias, dy.astype(np.float64).sum(axis=(0, 2, 3))) < 1e-6
    assert relative(save_mean, x.astype(np.float64).mean(axis=(0, 2, 3))) < 1e-6


def test_training_errors_name_the_argument_before_any_launch():
    x = np.ones((1, 3, 1, 1), np.float32)
    ones = np.ones(3, np.float32)
    mean, var = np.zeros(3, np.float32), np.ones(3, np.float32)
    with pytest.raises(ArgumentError, match=r"x: training mode needs more than 1 value per channel"):
        ops.batch_norm_2d_forward(x, ones, ones, mean, var, True, backend="host")
    assert np.array_equal(mean, np.zeros(3)) and np.array_equal(var, np.ones(3))  # nothing touched
    x = np.ones((2, 3, 4, 4), np.float32)
    with pytest.raises(ArgumentError, match=r"save_mean: training mode needs the forward's saved batch statistics"):
        ops.batch_norm_2d_backward(x, x, ones, mean, var, None, None, True, backend="host")
    with pytest.raises(ArgumentError, match=r"save_invstd: expected the saved batch statistics in f64"):
        ops.batch_norm_2d_backward(x.astype(np.float64), x.astype(np.float64), ones.astype(np.float64),
                                   mean.astype(np.float64), var.astype(np.float64), mean.astype(np.float64),
                                   ones, True, backend="host")  # fmt: skip
    with pytest.raises(ArgumentError, match=r"dy: expected a channels_last array like x, got strides \(48, 16, 4, 1\)"):
        ops.batch_norm_2d_backward(x, channels_last(x), ones, mean, var, mean, ones, True, backend="host")
    with pytest.raises(ArgumentError, match=r"x: expected a contiguous NCHW or channels_last array, got strides"):
        ops.batch_norm_2d_forward(x[:, :, ::2], ones, ones, mean, var, True, backend="host")


def test_a_forced_plan_of_the_other_memory_format_or_mode_is_refused():
    """A plan= whose kernels read NCHW on channels_last arrays (or eval kernels in training mode) would compute
    garbage: refused before any launch."""
    from rust_kernels.families.batch_norm import forward, training

    x = channels_last(np.random.default_rng(0).standard_normal((2, 8, 3, 4)).astype(np.float32))
    ones, zeros = np.ones(8, np.float32), np.zeros(8, np.float32)
    nchw = training.forward((2, 8, 3, 4), "f32", "f32", 0, False, 1)
    with pytest.raises(ArgumentError, match=r"plan: its kernel batch_norm_2d_batch_stats__f32__256__0__0 reads the "
                                            r"other memory format than the arrays' \(channels_last\)"):  # fmt: skip
        ops.batch_norm_2d_forward(x, ones, zeros, zeros, ones, True, backend="host", plan=nchw)
    eval_plan = forward.plan((2, 8, 3, 4), "f32", "f32", 16, 1)
    with pytest.raises(ArgumentError, match=r"plan: its kernel .* is not one of training mode's"):
        ops.batch_norm_2d_forward(np.ascontiguousarray(x), ones, zeros, zeros, ones, True, backend="host",
                                  plan=eval_plan)  # fmt: skip
    assert np.array_equal(zeros, np.zeros(8)) and np.array_equal(ones, np.ones(8))  # nothing touched


def test_the_rule_takes_one_launch_for_small_channels_last_blocks_however_few_they_are():
    """Where no block width fits the SMs' share, the rule still takes the one-launch kernels at the narrowest width
    if that block is at most SMALL_BLOCK_BYTES (measured on the H200: 8-32 KB blocks won over the two launches),
    for both directions and fused activations, and a candidate of the autotuner's; larger blocks keep two launches."""
    from rust_kernels.families.batch_norm import training

    def rule(which, shape, dtype="f32", activation=0):
        return training.plan(which, shape, dtype, "f32", 16, 132, True, activation)

    small = (1, 32, 32, 32)  # 8 blocks of one 4-channel unit over 1024 rows: 16 KB each
    vectorized = training.vector_mode(small, "f32", 16, True)
    assert training.column_options(small, "f32", vectorized, 132) == []
    for which in ("forward", "backward"):
        for activation in (0, training.ACTIVATIONS["relu"]):
            plan = rule(which, small, activation=activation)
            assert len(plan.launches) == 1 and dict(plan.values)["COLS"] == 1
            assert plan in training._candidates(which, small, "f32", "f32", 16, 132, True, activation, False)
    at_bound = (2, 32, 32, 32)  # 2048 rows of 16 bytes: 32 KB a block
    assert training.block_bytes(at_bound, "f32", vectorized, 1) == training.SMALL_BLOCK_BYTES
    assert len(rule("forward", at_bound).launches) == 1
    past = (4, 32, 32, 32)  # 64 KB a block, 8 blocks: two launches, as before
    assert training.column_options(past, "f32", vectorized, 132) == []
    assert len(rule("forward", past).launches) == len(rule("backward", past).launches) == 2
    assert len(rule("forward", small, "bf16").launches) == 1


def test_the_channels_last_column_rule_takes_one_block_an_sm_in_the_16_bit_backward():
    """The rule's one-launch channels_last width in the 16-bit backward: the narrowest of its options giving at most
    one block (CTA) an SM, else the widest (with 8 bf16 channels a unit: 116 units in one wave at width 1, 256 at 2,
    512 at 4); the forward's and f32's the widest."""
    from rust_kernels.families.batch_norm import training

    for shape, cols in (((1, 928, 14, 14), 1), ((1, 2048, 14, 14), 2), ((1, 4096, 7, 7), 4)):
        widths = {c for _, c in training.column_options(shape, "bf16", 1, 132)}
        assert widths >= {1, 2, 4}
        assert training.columns_rule("backward", shape, "bf16", 1, 132)[1] == cols, shape
        assert training.columns_rule("forward", shape, "bf16", 1, 132)[1] == max(widths), shape
    assert training.columns_rule("backward", (1, 4096, 7, 7), "bf16", 1, 16)[1] == 8  # past one wave: the widest
    f32 = {c for _, c in training.column_options((1, 512, 14, 14), "f32", 1, 132)}
    assert len(f32) > 1 and training.columns_rule("backward", (1, 512, 14, 14), "f32", 1, 132)[1] == max(f32)


@pytest.mark.parametrize("activation", [None, "silu"])
def test_the_channels_last_one_launch_kernels_equal_the_two_launch_plans_bit_for_bit(activation):
    """The one-launch channels_last kernels walk a column block as the two-launch plans do with one slice (the same
    threads on the same rows, the same merges, the same arithmetic per element): every output bit-identical, with
    and without a fused activation; and the plans take them for a small channels_last shape."""
    from rust_kernels.families.batch_norm import training

    shape = (3, 32, 5, 7)
    rng = np.random.default_rng(3)
    x = channels_last((rng.standard_normal(shape) * 3 + 1).astype(np.float32))
    dy = channels_last(rng.standard_normal(shape).astype(np.float32))
    weight, bias = rng.uniform(0.5, 1.5, 32).astype(np.float32), rng.standard_normal(32).astype(np.float32)
    code = training.ACTIVATIONS[activation] if activation else 0
    cols = training.geometry(shape, "f32", 1, True, 1)[2]

    def run(one_launch: bool) -> list[np.ndarray]:
        def plan(which: str):
            if one_launch:
                return training.fused_columns(which, shape, "f32", "f32", 1, training.REDUCTION_BLOCK, cols, code)
            build = training.forward if which == "forward" else training.backward
            return build(shape, "f32", "f32", 1, True, 1, split=1, activation=code)

        assert len(plan("forward").launches) == (1 if one_launch else 2)
        mean, var = np.zeros(32, np.float32), np.ones(32, np.float32)
        if activation:
            y, save_mean, save_invstd = ops.batch_norm_2d_act_forward(x, weight, bias, mean, var, 0.1, EPS, activation,
                                                                      backend="host", plan=plan("forward"))  # fmt: skip
            grads = ops.batch_norm_2d_act_backward(dy, x, weight, bias, save_mean, save_invstd, EPS, activation,
                                                   backend="host", plan=plan("backward"))  # fmt: skip
        else:
            y, save_mean, save_invstd = ops.batch_norm_2d_forward(x, weight, bias, mean, var, True, 0.1, EPS,
                                                                  backend="host", plan=plan("forward"))  # fmt: skip
            grads = ops.batch_norm_2d_backward(dy, x, weight, mean, var, save_mean, save_invstd, True, EPS,
                                               backend="host", plan=plan("backward"))  # fmt: skip
        return [y, save_mean, save_invstd, mean, var, *grads]

    two, one = run(False), run(True)
    assert one[0].strides == x.strides and one[5].strides == x.strides
    for a, b in zip(two, one, strict=True):
        assert np.array_equal(a, b)
    if not activation:
        assert relative(one[0], reference_forward(x, weight, bias, 0, 1, 0.1)[0]) < 1e-5
    small = training.plan("forward", (3, 32, 15, 15), "f32", "f32", 16, 132, True, code)  # past the warp kernels
    assert isinstance(small.kernel, tuple(training.FUSED_COLUMNS.values()))
    tiny = training.plan("forward", shape, "f32", "f32", 16, 132, True, code)
    assert isinstance(tiny.kernel, tuple(training.WARP_CHANNELS_LAST.values()))
    large = training.plan("forward", (64, 32, 56, 56), "f32", "f32", 16, 132, True, code)
    assert len(large.launches) == 2


def _one_launch(kind: str, which: str, shape, storage: str, param: str, vectorized: int, units: int, cols: int,
                activation: int = 0):  # fmt: skip
    """The persistent plan holding `units` rows a thread, or the cooperative one of as many slices as it has."""
    from rust_kernels.families.batch_norm import training

    held = training.persistent(which, shape, storage, param, vectorized, units, cols, activation)
    if kind == "persistent":
        return held
    return training.cooperative(which, shape, storage, param, vectorized, cols, held.grid[1], activation)


@pytest.mark.parametrize("kind", ["persistent", "cooperative"])
@pytest.mark.parametrize(("key", "shape", "units", "shift"),
                         [("f32", (4, 16, 12, 12), 8, 1e4), ("f64", (8, 6, 9, 9), 2, 1e4),
                          ("bf16-f32", (8, 32, 5, 7), 4, 1.0)])  # fmt: skip
def test_the_persistent_kernels_match_float64_and_the_two_launch_plans(kind, key, shape, units, shift):
    """The persistent and cooperative channels_last kernels in the emulator, which runs their CTAs at once (the widest
    column block: the most slices merged after grid::sync): y, the saved and running statistics, dx, dweight and dbias
    against float64, including a mean far above the deviation (1e4 and 1), each within the dtype's tolerance or twice
    the two-launch plans' own error (f32 y at mean 1e4: the f32 mean's rounding, half an ulp of 1e4, bounds both)."""
    from rust_kernels.families.batch_norm import training

    storage, param = common.split_key(key)
    rng = np.random.default_rng(5)
    x = channels_last((rng.standard_normal(shape) + shift).astype(DTYPES[storage].numpy_dtype()))
    dy = channels_last(rng.standard_normal(shape).astype(x.dtype))
    weight = rng.uniform(0.5, 1.5, shape[1]).astype(DTYPES[param].numpy_dtype())
    bias = rng.standard_normal(shape[1]).astype(weight.dtype)
    vectorized = training.vector_mode(shape, storage, 16, True)
    cols = training.column_widths(shape, storage, vectorized, 1)[-1]

    def persistent(which: str):
        return _one_launch(kind, which, shape, storage, param, vectorized, units, cols)

    assert persistent("forward").grid[1] > 1, "several slices to merge"
    assert isinstance(persistent("backward").kernel, tuple(getattr(training, kind.upper()).values()))
    ours = _host_pair(x, dy, None, weight, bias, None, persistent("forward"), persistent("backward"))
    rule = _host_pair(x, dy, None, weight, bias, None, None, None)
    y, mean, invstd, running_mean, running_var = reference_forward(x, weight, bias, 0, 1, 0.1)
    dx, dweight, dbias = reference_backward(dy, x, weight, ours[1], ours[2])
    accumulated = 1e-12 if storage == "f64" else 2e-5  # the statistics and parameter gradients
    rounded = {"f64": 1e-12, "f32": 2e-5}.get(storage, 1e-2)  # y and dx: 16-bit storage's rounding
    for got, want, other in zip(ours, [y, mean, invstd, running_mean, running_var, dx, dweight, dbias], rule,
                                strict=True):  # fmt: skip
        tolerance = rounded if got.dtype == x.dtype else accumulated
        assert relative(got, want) < max(tolerance, 2 * relative(other, want))
    assert ours[0].strides == x.strides and ours[5].strides == x.strides


@pytest.mark.parametrize("kind", ["persistent", "cooperative"])
@pytest.mark.parametrize("activation", ["relu", "silu"])
@pytest.mark.parametrize(("key", "shape"), [("f32", (4, 16, 12, 12)), ("bf16-f32", (8, 32, 5, 7))])
def test_the_persistent_kernels_with_an_activation_match_the_two_launch_plans(kind, key, shape, activation):
    """The _act persistent and cooperative kernels (the activation after the normalisation, its gradient before the
    sums) in the emulator, several slices: every output within the dtype's rounding of the two-launch _act plans'."""
    from rust_kernels.families.batch_norm import training

    storage, param = common.split_key(key)
    rng = np.random.default_rng(6)
    x = channels_last((rng.standard_normal(shape) * 2 + 0.5).astype(DTYPES[storage].numpy_dtype()))
    dy = channels_last(rng.standard_normal(shape).astype(x.dtype))
    weight = rng.uniform(0.5, 1.5, shape[1]).astype(DTYPES[param].numpy_dtype())
    bias = rng.standard_normal(shape[1]).astype(weight.dtype)
    vectorized = training.vector_mode(shape, storage, 16, True)
    cols = training.column_widths(shape, storage, vectorized, 1)[-1]
    code = training.ACTIVATIONS[activation]
    forward, backward = (_one_launch(kind, which, shape, storage, param, vectorized, 2, cols, code)
                         for which in ("forward", "backward"))  # fmt: skip
    assert forward.grid[1] > 1 and forward.kernel.activation == code
    ours = _host_pair(x, dy, None, weight, bias, activation, forward, backward)
    rule = _host_pair(x, dy, None, weight, bias, activation, None, None)
    rounded = 2e-5 if storage == "f32" else 1e-2
    for got, other in zip(ours, rule, strict=True):
        assert relative(got, other) < (rounded if got.dtype == x.dtype else 2e-5)


def test_the_persistent_kernels_are_candidates_unless_disabled(monkeypatch):
    """The persistent plans are channels_last candidates (not NCHW's; with a fused activation, its _act kernels),
    where the grid fits two CTAs an SM, and so are the cooperative ones, where what a direction reads twice fits
    COOPERATIVE_BYTES, unless RUST_KERNELS_PERSISTENT=0."""
    from rust_kernels.families.batch_norm import training
    from rust_kernels.runtime import Placement, Problem

    shape = (8, 64, 14, 14)

    def persistent_plans(channels_last: bool, activation: int, enabled: bool) -> list:
        plans = training._candidates("backward", shape, "bf16", "f32", 16, 132, channels_last, activation, enabled)
        return [p for p in plans if isinstance(p.kernel, tuple(training.PERSISTENT.values()))]

    relu = training.ACTIVATIONS["relu"]
    fused = persistent_plans(True, relu, True)
    assert fused and all(p.kernel.activation == relu for p in fused)

    found = persistent_plans(True, 0, True)
    assert found and all(p.grid[0] * p.grid[1] <= 2 * 132 for p in found)
    assert not persistent_plans(True, 0, False) and not persistent_plans(False, 0, True)
    assert not training.persistent_options((128, 64, 56, 56), "bf16", 1, 132, 2 * 132), "too large to hold"
    cooperative = [p for p in training._candidates("backward", shape, "bf16", "f32", 16, 132, True, relu, True)
                   if isinstance(p.kernel, tuple(training.COOPERATIVE.values()))]  # fmt: skip
    assert cooperative and all(p.kernel.activation == relu and p.grid[0] * p.grid[1] <= 3 * 132 for p in cooperative)
    rows = 8 * 14 * 14
    assert all(rows >= p.grid[1] * training.COOPERATIVE_ROWS * 256 // dict(p.values)["COLS"] for p in cooperative)
    assert not training.cooperative_options("backward", (32, 256, 28, 28), "f32", 1, 132), "dy and x: 51 MB"
    assert training.cooperative_options("backward", (32, 384, 28, 28), "bf16", 1, 132), "dy and x: 38.5 MB"
    assert training.cooperative_options("forward", (32, 256, 28, 28), "bf16", 1, 132), "x: 13 MB"
    problem = Problem(shape=shape, dtype="bf16", param="f32", values={}, scalars={}, order=(0, 2, 3, 1))
    kinds = {training.PERSISTENT["backward", False], training.COOPERATIVE["backward", False]}
    one_launch = (*training.PERSISTENT.values(), *training.COOPERATIVE.values())
    for value, expected in (("0", set()), ("1", kinds), ("", kinds)):  # unset (empty): on
        monkeypatch.setenv("RUST_KERNELS_PERSISTENT", value)
        plans = training.candidates("backward", problem, Placement(16, 132))
        assert {type(p.kernel) for p in plans if isinstance(p.kernel, one_launch)} == expected


def _host_pair(x, dy, res, weight, bias, activation, forward, backward) -> list[np.ndarray]:
    """One training-mode forward + backward on the host with the given plans (through the add + ReLU, activation or
    plain ops, as `activation` says): [y, save_mean, save_invstd, running mean, running var, *grads]."""
    par = weight.dtype
    mean, var = np.zeros(weight.shape, par), np.ones(weight.shape, par)
    if activation == "add_relu":
        y, save_mean, save_invstd = ops.batch_norm_2d_add_relu_forward(x, res, weight, bias, mean, var, 0.1, EPS,
                                                                       backend="host", plan=forward)  # fmt: skip
        grads = ops.batch_norm_2d_backward(dy, x, weight, mean, var, save_mean, save_invstd, True, EPS,
                                           backend="host", plan=backward)  # fmt: skip
    elif activation:
        y, save_mean, save_invstd = ops.batch_norm_2d_act_forward(x, weight, bias, mean, var, 0.1, EPS, activation,
                                                                  backend="host", plan=forward)  # fmt: skip
        grads = ops.batch_norm_2d_act_backward(dy, x, weight, bias, save_mean, save_invstd, EPS, activation,
                                               backend="host", plan=backward)  # fmt: skip
    else:
        y, save_mean, save_invstd = ops.batch_norm_2d_forward(x, weight, bias, mean, var, True, 0.1, EPS,
                                                              backend="host", plan=forward)  # fmt: skip
        grads = ops.batch_norm_2d_backward(dy, x, weight, mean, var, save_mean, save_invstd, True, EPS,
                                           backend="host", plan=backward)  # fmt: skip
    return [y, save_mean, save_invstd, mean, var, *grads]


def _held_in_registers(key, shape, shift, held, channels_last=False):
    """A one-launch pair holding each channel in registers (`held(direction, activation)`: its plan): y, the saved
    and running statistics, dx, dweight and dbias against float64, within the dtype's tolerance or twice the
    two-launch plans' own error; with SiLU fused its outputs equal the CTA-a-channel (channels_last: CTA-a-column)
    kernels' within a rounding."""
    from rust_kernels.families.batch_norm import training

    storage, param = common.split_key(key)
    rng = np.random.default_rng(9)
    x = (rng.standard_normal(shape) + shift).astype(DTYPES[storage].numpy_dtype())
    dy = rng.standard_normal(shape).astype(x.dtype)
    if channels_last:  # NHWC buffers viewed as NCHW
        x, dy = (np.ascontiguousarray(a.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2) for a in (x, dy))
    weight = rng.uniform(0.5, 1.5, shape[1]).astype(DTYPES[param].numpy_dtype())
    bias = rng.standard_normal(shape[1]).astype(weight.dtype)
    ours = _host_pair(x, dy, None, weight, bias, None, held("forward", 0), held("backward", 0))
    two = {w: getattr(training, w)(shape, storage, param, 0, channels_last, 1) for w in ("forward", "backward")}
    rule = _host_pair(x, dy, None, weight, bias, None, two["forward"], two["backward"])
    y, mean, invstd, running_mean, running_var = reference_forward(x, weight, bias, 0, 1, 0.1)
    dx, dweight, dbias = reference_backward(dy, x, weight, ours[1], ours[2])
    accumulated = 1e-12 if storage == "f64" else 2e-5
    rounded = {"f64": 1e-12, "f32": 2e-5}.get(storage, 1e-2)
    for got, want, other in zip(ours, [y, mean, invstd, running_mean, running_var, dx, dweight, dbias], rule,
                                strict=True):  # fmt: skip
        tolerance = rounded if got.dtype == x.dtype else accumulated
        assert relative(got, want) < max(tolerance, 2 * relative(other, want))
    silu = training.ACTIVATIONS["silu"]
    one = {w: training.fused_columns(w, shape, storage, param, 0, 128, 1, silu) if channels_last
           else training.fused(w, shape, storage, param, 0, 128, silu) for w in ("forward", "backward")}  # fmt: skip
    fused = _host_pair(x, dy, None, weight, bias, "silu", one["forward"], one["backward"])
    for got, want in zip(_host_pair(x, dy, None, weight, bias, "silu", held("forward", silu), held("backward", silu)),
                         fused, strict=True):  # fmt: skip
        ulps = 2 * float(ml_dtypes.finfo(x.dtype).eps) if got.dtype == x.dtype else 0.0  # y, dx: a rounding apart
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=max(1e-4, ulps),
                                   atol=max(1e-5, ulps))  # fmt: skip


@pytest.mark.parametrize(("key", "shape", "shift"), [("f32", (1, 6, 7, 7), 1e4), ("f64", (3, 5, 4, 4), 1e4),
                                              ("bf16-f32", (1, 9, 9, 7), 1.0),
                                              ("f16", (128, 3, 2, 2), 0.0)])  # fmt: skip
def test_the_warp_kernels_match_float64_and_the_two_launch_plans(key, shape, shift):
    """The warp kernels (a warp per NCHW channel, held in registers: 48 to 512 values), a mean far above the
    deviation (1e4 and 1) included (_held_in_registers). The rule takes them for channels of at most 64 values, and
    where rows are too short for the CTA-a-channel kernels up to 512; they are no candidates past 256 (512 for such
    rows)."""
    from rust_kernels.families.batch_norm import training

    storage, param = common.split_key(key)
    units = training.warp_units(shape, storage)
    assert training.warp_units((1, 4, 17, 17), "f32") is None and training.warp_units((128, 4, 2, 3), "f16") is None
    _held_in_registers(key, shape, shift, lambda which, act: training.warp(which, shape, storage, param, units, act))
    for small, rule_takes in (((1, 1024, 7, 7), True), ((128, 2560, 2, 2), True), ((1, 208, 14, 14), False),
                              ((64, 8, 4, 4), False)):  # fmt: skip
        chosen = training.plan("backward", small, "f32", "f32", 16, 132, False)  # f32 2x2 rows: 16 bytes
        assert isinstance(chosen.kernel, tuple(training.WARP.values())) == rule_takes, small


@pytest.mark.parametrize(("key", "shape", "shift"), [("f32", (1, 6, 7, 7), 1e4), ("f64", (3, 5, 4, 4), 1e4),
                                              ("bf16-f32", (1, 9, 9, 7), 1.0),
                                              ("f16", (100, 3, 1, 3), 0.0)])  # fmt: skip
def test_the_channels_last_warp_kernels_match_float64_and_the_two_launch_plans(key, shape, shift):
    """The channels_last warp kernels (a warp per channel of NHWC arrays, its lanes reading rows at stride C: 48 to
    512 values), a mean far above the deviation (1e4 and 1) included (_held_in_registers); no candidates past 512
    values or at H*W = 1 (the column kernels read those rows coalesced); the rule's on small tensors
    (WARP_CHANNELS_LAST_RULE)."""
    from rust_kernels.families.batch_norm import training

    storage, param = common.split_key(key)
    units = training.warp_units(shape, storage, True)
    assert units is not None and units * 32 >= shape[0] * shape[2] * shape[3]
    assert training.warp_units((1, 4, 17, 31), "f32", True) is None
    assert training.warp_units((64, 8, 1, 1), "f16", True) is None

    def held(which, act):
        return training.warp(which, shape, storage, param, units, act, True)

    _held_in_registers(key, shape, shift, held, True)
    # The rule's: the forward below 1 MiB of x, the backward below 256 KiB up to 256 values a channel.
    for which, small, dtype, rule_takes in (("forward", (1, 1024, 14, 14), "f32", True),
                                            ("forward", (16, 1024, 4, 4), "f32", False),
                                            ("backward", (1, 256, 14, 14), "f32", True),
                                            ("backward", (1, 544, 14, 14), "f32", False),
                                            ("backward", (128, 64, 2, 2), "bf16", False)):  # fmt: skip
        chosen = training.plan(which, small, dtype, "f32", 16, 132, True)
        assert isinstance(chosen.kernel, tuple(training.WARP_CHANNELS_LAST.values())) == rule_takes, small


@pytest.mark.parametrize(("key", "shape", "shift", "option"), [("f32", (2, 3, 17, 17), 1e4, 0),
                                                        ("f64", (3, 2, 9, 9), 1e4, 0),
                                                        ("bf16-f32", (1, 5, 14, 14), 1.0, 0),
                                                        ("f16", (32, 2, 7, 7), 0.0, -1)])  # fmt: skip
def test_the_block_kernels_match_float64_and_the_two_launch_plans(key, shape, shift, option):
    """The block kernels (a CTA per NCHW channel, held in registers: 129 to 4096 values), at the smallest and the
    largest CTA the autotuner times (_held_in_registers); they are candidates from 129 values to 4096, not at H*W = 1,
    never with more threads than values (but in the checks, which take every instance holding the channel), and the
    rule's up to 2048 values (128 threads up to 1024, else 256)."""
    from rust_kernels.families.batch_norm import training

    storage, param = common.split_key(key)
    threads, units = training.block_options(shape)[option]
    _held_in_registers(key, shape, shift, lambda w, act: training.block(w, shape, storage, param, threads, units, act))
    assert training.block_options((1, 8, 8, 16)) == [] and training.block_options((4097, 8, 1, 1)) == []
    assert training.block_options((1, 8, 64, 65)) == [] and training.block_options((1, 8, 8, 17)) == [(128, 2)]
    assert training.block_options((32, 8, 8, 8)) == [(128, 16), (256, 8), (512, 4)]
    every = training.block_options((1, 8, 8, 17), every=True)
    assert len(every) == 11 and training.block_options((2, 8, 5, 8), every=True) == every
    for blocks in (True, False):
        candidates = training._candidates("backward", (32, 8, 8, 8), "f32", "f32", 16, 132, False, 0, False,
                                          blocks)  # fmt: skip
        assert sum(isinstance(p.kernel, training.BLOCK["backward", False]) for p in candidates) == 3 * blocks
    for shape, rule in (((1, 8, 14, 14), (128, 2)), ((1, 8, 32, 32), (128, 8)), ((32, 8, 8, 8), (256, 8)),
                        ((1, 8, 64, 64), None), ((1, 8, 8, 16), None), ((2048, 8, 1, 1), None)):  # fmt: skip
        assert training.block_rule(shape) == rule, shape
        chosen = training.plan("forward", shape, "bf16", "f32", 16, 132, False, 0, True)
        assert isinstance(chosen.kernel, training.BLOCK["forward", False]) == (rule is not None), shape
        assert not isinstance(training.plan("forward", shape, "bf16", "f32", 16, 132, False).kernel,
                              tuple(training.BLOCK.values()))  # fmt: skip


@pytest.mark.parametrize("value", ["", "0", "1"])
def test_the_block_kernels_are_the_ops_unless_rust_kernels_block_is_0(monkeypatch, value):
    """The block kernels are among the training ops' candidates and in their rule (the activation and add + ReLU
    ops' too), unset or with RUST_KERNELS_BLOCK=1; 0 leaves them out."""
    from rust_kernels import ops
    from rust_kernels.families.batch_norm import training
    from rust_kernels.runtime import Placement

    monkeypatch.setenv("RUST_KERNELS_BLOCK", value)
    kinds = tuple(training.BLOCK.values())
    x, dy = np.zeros((32, 8, 8, 8), np.float32), np.zeros((32, 8, 8, 8), np.float32)
    c = np.ones(8, np.float32)
    calls = {"batch_norm_2d_forward": (x, c, c, c, c), "batch_norm_2d_backward": (dy, x, c, c, c, c, c),
             "batch_norm_2d_act_forward": (x, c, c, c, c),
             "batch_norm_2d_add_relu_backward": (dy, x, x, c, c, c)}  # fmt: skip
    for name, arrays in calls.items():
        op = getattr(ops, name).op
        values = tuple({"training": True, "activation": "relu"}.get(s.name, s.default) for s in op.scalars)
        _, problem = op.problem(arrays, values, "host")
        placement = Placement(16, 132)
        held = [p for p in op.candidates(problem, placement) if any(isinstance(k.kernel, kinds) for k in p.launches)]
        assert len(held) == (0 if value == "0" else 3), name
        chosen = op.choose(problem, placement).launches
        assert any(isinstance(launch.kernel, kinds) for launch in chosen) == (value != "0"), name


@pytest.mark.parametrize("activation", [None, "relu", "add_relu"])
@pytest.mark.parametrize(("key", "shape"), [("bf16-f32", (3, 8, 3, 3)), ("f16", (2, 12, 5, 5)),
                                            ("f32", (2, 6, 7, 7)), ("f64", (2, 3, 3, 5))])  # fmt: skip
def test_the_flat_elementwise_packs_equal_one_element_at_a_time_bit_for_bit(key, shape, activation):
    """NCHW rows that no pack divides: the elementwise launches' 16-byte packs over the flat tensor (VECTORIZED 3,
    a pack spanning two channels, the last channel's next being channel 0 of the next image) give every output
    bit-identical to the same plans one element at a time, with a fused activation and with the residual add + ReLU;
    the rule takes them for such shapes."""
    from rust_kernels.families.batch_norm import residual, training

    dtype, param = common.split_key(key)
    act, par = (DTYPES[d].numpy_dtype() for d in (dtype, param))
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(shape) * 3 + 1).astype(act)
    dy, res = (rng.standard_normal(shape).astype(act) for _ in range(2))
    channels = shape[1]
    weight, bias = rng.uniform(0.5, 1.5, channels).astype(par), rng.standard_normal(channels).astype(par)
    code = training.ACTIVATIONS.get(activation, 0)
    assert training.elementwise_mode(shape, dtype, 16, False) == training.FLAT
    large = (128, 96, 35, 35)  # two launches (a channel too large for the one-launch kernels)
    assert training.plan("forward", large, dtype, param, 16, 132, False, code).launches[-1].kernel.vectorized == 3

    def run(packs: int) -> list[np.ndarray]:
        build = residual.forward_plan if activation == "add_relu" else training.forward
        forward = build(shape, dtype, param, 0, False, 1, split=1, activation=code, packs=packs)
        backward = training.backward(shape, dtype, param, 0, False, 1, split=1, activation=code, packs=packs)
        assert forward.launches[-1].kernel.vectorized == backward.launches[-1].kernel.vectorized == packs
        return _host_pair(x, dy, res, weight, bias, activation, forward, backward)

    flat, single = run(training.FLAT), run(0)
    for a, b in zip(flat, single, strict=True):
        assert np.array_equal(a, b, equal_nan=True)
    if activation is None:
        close = {"f64": 1e-13, "f32": 1e-5}.get(key, 1e-2)
        assert relative(flat[0], reference_forward(x, weight, bias, 0, 1, 0.1)[0]) < close
        want = reference_backward(dy, x, weight, flat[1], flat[2])
        assert relative(flat[5], want[0]) < close


@pytest.mark.parametrize("activation", [None, "relu"])
@pytest.mark.parametrize(("key", "shape"), [("bf16-f32", (3, 8, 3, 3)), ("f16", (2, 12, 5, 5)), ("f32", (2, 6, 7, 7)),
                                            ("f64", (2, 3, 3, 5)), ("bf16-f32", (5, 16, 9, 9))])  # fmt: skip
def test_the_masked_pack_reductions_match_float64_and_the_single_element_ones(key, shape, activation):
    """NCHW rows that no pack divides, their reductions reading the rows as masked 16-byte packs (VECTORIZED 3:
    packs spanning channels, rows ending mid-pack, a slot past the last pack masked whole, at several splits): the
    statistics, y, dx, dweight and dbias match float64 and the one-element-at-a-time reductions' within the
    dtype's tolerance."""
    from rust_kernels.families.batch_norm import training

    _check_reduction_mode(training.FLAT, key, shape, activation, (1, 2))


@pytest.mark.parametrize("activation", [None, "relu", "silu"])
@pytest.mark.parametrize(("key", "shape", "groups"), [
    ("bf16-f32", (3, 40, 7, 7), (32, 8)), ("bf16-f32", (4, 8, 3, 3), (8,)), ("f16", (3, 24, 5, 5), (24,)),
    ("f32", (2, 44, 5, 5), (32, 12)), ("f64", (3, 6, 3, 5), (6,)), ("bf16-f32", (2, 16, 4, 4), (16,))])  # fmt: skip
def test_the_grouped_reductions_match_float64_and_the_single_element_ones(key, shape, groups, activation):
    """NCHW reductions over groups of adjacent channels (VECTORIZED 4: 16-byte packs over a group's rows, a pack
    spanning two channels, several rows of threads, a last group narrower than the others, images split in 1-3
    slices): the statistics, y, dx, dweight and dbias match float64 and the one-element-at-a-time reductions'."""
    from rust_kernels.families.batch_norm import training

    dtype = common.split_key(key)[0]
    width = training.group_width(shape, dtype)
    assert width is not None and training.groups_fit(shape, dtype, 16, False)
    assert [min(width, shape[1] - c) for c in range(0, shape[1], width)] == list(groups)
    assert not training.groups_fit(shape, dtype, 8, False) and not training.groups_fit(shape, dtype, 16, True)
    _check_reduction_mode(training.GROUPS, key, shape, activation, (1, 2, 3))


@pytest.mark.parametrize("activation", [0, 1])
def test_the_backward_rule_reads_16_bit_rows_no_pack_divides_in_masked_packs_from_5_mib(activation):
    """From FLAT_RULE_BYTES of 16-bit NCHW x whose rows no pack divides (7x7, 17x17, 35x35), the backward rule's
    reductions read dy and x in masked 16-byte packs (FLAT) at their own split, beside the FLAT elementwise launch:
    over the one-launch kernels, the grouped reductions and the element-at-a-time ones alike. Not below it, not for
    f32, rows a pack divides or 8-byte alignment, and never in the forward."""
    from rust_kernels.families.batch_norm import training

    def rule(which, shape, dtype="bf16", alignment=16):
        return training.plan(which, shape, dtype, "f32", alignment, 132, False, activation)

    for shape in [(128, 440, 7, 7), (128, 2048, 7, 7), (128, 160, 17, 17), (128, 64, 35, 35), (128, 2048, 9, 9)]:
        plan = rule("backward", shape)  # 5.3 to 40.5 MiB of x
        assert [launch.kernel.vectorized for launch in plan.launches] == [training.FLAT, training.FLAT]
        assert plan.launches[0].kernel.name.startswith("batch_norm_2d_backward_reduce")
        assert dict(plan.values)["SPLIT"] == training.geometry(shape, "bf16", training.FLAT, False, 132)[1]
        assert rule("backward", shape, "f16").kernel.vectorized == training.FLAT
        assert rule("forward", shape).kernel.vectorized != training.FLAT
        assert rule("backward", shape, "f32").kernel.vectorized != training.FLAT
        assert rule("backward", shape, alignment=8).kernel.vectorized != training.FLAT
    assert rule("backward", (128, 1024, 14, 14)).kernel.vectorized == 2  # 8-byte packs divide the rows


@pytest.mark.parametrize("which", ["forward", "backward"])
def test_the_rule_leaves_the_one_launch_kernels_for_16_bit_rows_no_pack_divides_from_2_5_mib(which):
    """The one-launch kernels read 16-bit rows that no pack divides one element at a time: from FUSED_UNPACKED_BYTES
    of x the rule takes the two-launch plan there (the elementwise launch in FLAT packs), where it took them before;
    below it, for f32 and for rows a pack divides, it keeps them."""
    from rust_kernels.families.batch_norm import training

    def rule(shape, dtype="bf16"):
        return training.plan(which, shape, dtype, "f32", 16, 132, False)

    fused = f"batch_norm_2d_fused_{which}"
    for shape in [(32, 160, 17, 17), (128, 320, 7, 7)]:  # 2.8 and 3.8 MiB
        plan = rule(shape)
        assert [launch.kernel.vectorized for launch in plan.launches] == [0, training.FLAT]
        assert rule(shape, "f32").kernel.name == fused
    assert rule((32, 128, 17, 17)).kernel.name == fused  # 2.3 MiB
    assert rule((32, 160, 16, 16)).kernel.name == fused  # packs divide the rows


def test_the_grouped_reductions_are_candidates_where_rows_are_short_and_refuse_shapes_they_cannot_read():
    """GROUPS plans are autotuner candidates for NCHW rows shorter than GROUP_ROW_BYTES, 16-byte aligned: a CTA per
    group of COLS channels; never for channels_last, longer rows or lesser alignment. The forward rule takes them over
    the one-launch kernels where no pack divides the rows, from GROUPS_RULE_BYTES of x on (the backward's takes FLAT
    there). Forced where no group fits, the kernel's precondition refuses before any launch, naming the mode."""
    import ml_dtypes

    from rust_kernels.families.batch_norm import training

    def modes(shape, dtype, alignment=16, channels_last=False):
        plans = training._candidates("forward", shape, dtype, "f32", alignment, 132, channels_last, 0, False)
        return {p.kernel.vectorized for p in plans if hasattr(p.kernel, "vectorized")}

    shape = (128, 2048, 7, 7)
    assert training.GROUPS in modes(shape, "bf16") and training.group_width(shape, "bf16") == 32

    def rule(which, shape, dtype="bf16"):
        return training.plan(which, shape, dtype, "f32", 16, 132, False).kernel

    assert rule("forward", shape).vectorized == training.GROUPS
    assert rule("forward", (128, 440, 7, 7)).vectorized == training.GROUPS  # 5.5 MB of x
    assert rule("forward", (128, 192, 7, 7)).name == "batch_norm_2d_fused_forward"  # 2.4 MB
    assert rule("forward", (128, 1024, 14, 14)).vectorized != training.GROUPS  # 16-byte packs divide the rows
    stats = training.forward(shape, "bf16", "f32", training.GROUPS, False, 132, split=4)
    assert stats.grid == (64, 4, 1) and dict(stats.values)["COLS"] == 32
    # The elementwise launch beside them streams in the rule's packs (GROUPS is the reductions' only).
    assert stats.launches[-1].kernel.vectorized == training.FLAT
    backward = training.backward((8, 64, 6, 6), "f32", "f32", training.GROUPS, False, 132)
    assert backward.launches[-1].kernel.vectorized == 1
    assert training.GROUPS not in modes((128, 256, 14, 14), "bf16")  # 392-byte rows
    assert training.GROUPS not in modes(shape, "f32")  # 196-byte rows
    assert training.GROUPS not in modes(shape, "bf16", alignment=8)
    assert training.GROUPS not in modes(shape, "bf16", channels_last=True)
    assert training.group_width((2, 8, 2, 2), "bf16") is None  # a row shorter than a pack
    small = (2, 8, 2, 2)
    x = np.ones(small, ml_dtypes.bfloat16)
    ones, zeros = np.ones(8, np.float32), np.zeros(8, np.float32)
    forced = training.forward(small, "bf16", "f32", training.GROUPS, False, 1, packs=0)
    with pytest.raises(ArgumentError, match="VECTORIZED = 4 reads the rows of COLS adjacent channels"):
        ops.batch_norm_2d_forward(x, ones, zeros, zeros.copy(), ones.copy(), True, 0.1, EPS, backend="host",
                                  plan=forced)  # fmt: skip


def _check_reduction_mode(mode: int, key: str, shape: tuple[int, ...], activation: str | None,
                          splits: tuple[int, ...]) -> None:  # fmt: skip
    """The training forward and backward in the emulator with their reductions in pack mode `mode` at each split
    (the elementwise launches in the rule's): against float64 and against the reductions one element at a time."""
    from rust_kernels.families.batch_norm import training

    dtype, param = common.split_key(key)
    act, par = (DTYPES[d].numpy_dtype() for d in (dtype, param))
    rng = np.random.default_rng(11)
    x = (rng.standard_normal(shape) * 3 + 1).astype(act)
    dy = rng.standard_normal(shape).astype(act)
    channels = shape[1]
    weight, bias = rng.uniform(0.5, 1.5, channels).astype(par), rng.standard_normal(channels).astype(par)
    code = training.ACTIVATIONS.get(activation, 0)
    close = {"f64": 1e-12, "f32": 1e-5}.get(dtype, 2e-2)
    packs = training.elementwise_mode(shape, dtype, 16, False)  # type: ignore[arg-type]

    def run(mode: int, split: int) -> list[np.ndarray]:
        forward = training.forward(shape, dtype, param, mode, False, 1, split=split, activation=code, packs=packs)
        backward = training.backward(shape, dtype, param, mode, False, 1, split=split, activation=code, packs=packs)
        assert forward.kernel.vectorized == backward.kernel.vectorized == mode
        return _host_pair(x, dy, None, weight, bias, activation, forward, backward)

    single = run(0, 1)
    want = reference_forward(x, weight, bias, 0, 1, 0.1)
    for split in splits:
        got = run(mode, split)
        for a, b in zip(got, single, strict=True):
            assert relative(a, b) < close
        for mine, expected in zip(got[1:5], want[1:5], strict=True):
            assert relative(mine, expected) < close
        if activation is None:
            assert relative(got[0], want[0]) < close
            back = reference_backward(dy, x, weight, got[1], got[2])
            for mine, expected in zip(got[5:], back, strict=True):
                assert relative(mine, expected) < close


# --- PyTorch --------------------------------------------------------------------------------------------------------
torch = pytest.importorskip("torch")
import rust_kernels.torch as rk_torch  # noqa: E402

OPS = torch.ops.rust_kernels


def step_alike(theirs, ours, memory_format) -> None:
    """One forward and backward of torch's module and ours on the same input: outputs (in the input's memory
    format) and input gradients alike."""
    x = (torch.randn(3, 6, 4, 5, dtype=torch.float64) * 2 + 1).contiguous(memory_format=memory_format)
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = theirs(a), ours(b)
    dy = torch.randn_like(ya)
    ya.backward(dy), yb.backward(dy)
    assert yb.is_contiguous(memory_format=memory_format)
    torch.testing.assert_close(yb, ya)
    torch.testing.assert_close(b.grad, a.grad)


@pytest.mark.parametrize("memory_format", [torch.contiguous_format, torch.channels_last], ids=["nchw", "cl"])
@pytest.mark.parametrize("momentum", [0.1, None])
def test_the_module_trains_as_torchs_does(memory_format, momentum):
    """Three steps of rust_kernels.torch.BatchNorm2d against torch.nn.BatchNorm2d: outputs (in the input's memory
    format), gradients, running statistics and num_batches_tracked (momentum=None: the cumulative average)."""
    torch.manual_seed(0)
    theirs = torch.nn.BatchNorm2d(6, momentum=momentum).double()
    ours = rk_torch.convert(copy.deepcopy(theirs))
    for _ in range(3):
        step_alike(theirs, ours, memory_format)
    for name in ("weight", "bias"):
        torch.testing.assert_close(getattr(ours, name).grad, getattr(theirs, name).grad)
    torch.testing.assert_close(ours.running_mean, theirs.running_mean)
    torch.testing.assert_close(ours.running_var, theirs.running_var)
    assert int(ours.num_batches_tracked) == int(theirs.num_batches_tracked) == 3


@pytest.mark.parametrize("memory_format", [torch.contiguous_format, torch.channels_last], ids=["nchw", "cl"])
@pytest.mark.parametrize("affine", [True, False])
def test_a_module_without_running_statistics_normalises_with_the_batchs_in_both_modes(memory_format, affine,
                                                                                       monkeypatch):  # fmt: skip
    """track_running_stats=False: our kernels normalise with the batch's statistics in training and in eval mode
    (torch's does the same), in both memory formats; outputs and gradients as torch's, no buffers appear."""
    from rust_kernels.families.batch_norm import forward
    from rust_kernels.torch import library

    torch.manual_seed(1)
    theirs = torch.nn.BatchNorm2d(6, affine=affine, track_running_stats=False).double()
    ours = rk_torch.convert(copy.deepcopy(theirs))
    calls = []
    run_host = library.run_host
    monkeypatch.setattr(library, "run_host", lambda *args, **kw: calls.append(args[0]) or run_host(*args, **kw))
    for mode in ("train", "eval"):
        ours.train(mode == "train"), theirs.train(mode == "train")
        step_alike(theirs, ours, memory_format)
    assert sum(c is forward.NATIVE for c in calls) == 2  # both modes' forwards on our training kernels
    if affine:
        torch.testing.assert_close(ours.weight.grad, theirs.weight.grad)
        torch.testing.assert_close(ours.bias.grad, theirs.bias.grad)
    assert ours.running_mean is None and ours.num_batches_tracked is None and list(ours.buffers()) == []


def test_training_operators_pass_opcheck_and_gradcheck():
    x = torch.randn(2, 3, 4, 4, dtype=torch.float64)
    weight, bias = torch.rand(3, dtype=torch.float64) + 0.5, torch.randn(3, dtype=torch.float64)

    def statistics():
        return torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)

    for layout in (x, x.contiguous(memory_format=torch.channels_last)):
        torch.library.opcheck(OPS.batch_norm_2d_forward, (layout, weight, bias, *statistics(), True, 0.1, EPS))
        y, save_mean, save_invstd = OPS.batch_norm_2d_forward(layout, weight, bias, *statistics(), True, 0.1, EPS)
        dy = torch.randn_like(y)
        torch.library.opcheck(OPS.batch_norm_2d_backward,
                              (dy, layout, weight, *statistics(), save_mean, save_invstd, True, EPS))  # fmt: skip

    def f(x, weight, bias):
        return OPS.batch_norm_2d_forward(x, weight, bias, *statistics(), True, 0.1, EPS)[0]

    leaves = [t.clone().requires_grad_() for t in (x, weight, bias)]
    assert torch.autograd.gradcheck(f, leaves)


def test_training_traces_whole_under_torch_compile():
    """fullgraph=True: the mutating operator's fake kernel and autograd trace (aot_eager: no C++ compiler needed)."""
    torch._dynamo.reset()
    theirs = torch.nn.BatchNorm2d(4)
    ours = rk_torch.convert(copy.deepcopy(theirs))
    compiled = torch.compile(ours, fullgraph=True, backend="aot_eager")
    x = torch.randn(2, 4, 3, 5).contiguous(memory_format=torch.channels_last)
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = theirs(a), compiled(b)
    ya.sum().backward(), yb.sum().backward()
    torch.testing.assert_close(yb, ya)
    torch.testing.assert_close(b.grad, a.grad)
    torch.testing.assert_close(ours.running_var, theirs.running_var)


# --- on the GPU -------------------------------------------------------------------------------------------------------
TOLERANCE = {torch.float64: 1e-12, torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 4e-3}


def _error(got, want):
    """max |got - want| / max |want|, in float64."""
    return float((got.double() - want).abs().max() / want.abs().max().clamp_min(1e-30))


@pytest.mark.gpu
@pytest.mark.parametrize("memory_format", [torch.contiguous_format, torch.channels_last], ids=["nchw", "cl"])
@pytest.mark.parametrize("key", common.DTYPE_KEYS)
def test_gpu_training_matches_float64_as_closely_as_torchs_own(key, memory_format):
    """Ours and torch.nn.functional.batch_norm (training) on CUDA, both against float64: y, dx, dweight, dbias and
    the running statistics within the dtype's tolerance, ours never more than twice torch's error (or the tolerance
    / 10)."""
    act, par = (getattr(torch, DTYPES[d].numpy) for d in common.split_key(key))
    torch.manual_seed(0)
    shape = (8, 24, 14, 14)
    x64 = torch.randn(shape, dtype=torch.float64) * 3 + 2
    dy64 = torch.randn(shape, dtype=torch.float64)
    w64, b64 = torch.rand(24, dtype=torch.float64) + 0.5, torch.randn(24, dtype=torch.float64)

    def run(fn, dtype, device):
        x = x64.to(device, dtype).contiguous(memory_format=memory_format).detach().clone().requires_grad_()
        w, b = (t.to(device, par if dtype != torch.float64 else dtype).detach().clone().requires_grad_()
                for t in (w64, b64))  # fmt: skip
        mean = torch.zeros(24, device=device, dtype=w.dtype)
        var = torch.ones(24, device=device, dtype=w.dtype)
        y = fn(x, mean, var, w, b, True, 0.1, EPS)
        y.backward(dy64.to(device, dtype).contiguous(memory_format=memory_format))
        return [t.detach().cpu() for t in (y, x.grad, w.grad, b.grad, mean, var)], y

    want, _ = run(torch.nn.functional.batch_norm, torch.float64, "cpu")
    theirs, _ = run(torch.nn.functional.batch_norm, act, "cuda")
    ours, y = run(rk_torch.batch_norm_2d, act, "cuda")
    assert y.is_contiguous(memory_format=memory_format)
    for name, a, b, w in zip(("y", "dx", "dweight", "dbias", "running_mean", "running_var"), ours, theirs, want,
                             strict=True):  # fmt: skip
        tol = TOLERANCE[act]
        assert _error(a, w) <= max(tol, 2 * _error(b, w), tol / 10), (name, _error(a, w), _error(b, w))


@pytest.mark.gpu
def test_gpu_training_is_bit_identical_run_to_run_and_captured_by_cuda_graphs():
    torch.manual_seed(1)
    x = torch.randn(32, 64, 28, 28, device="cuda", dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
    w, b = torch.rand(64, device="cuda") + 0.5, torch.randn(64, device="cuda")
    first = [OPS.batch_norm_2d_forward(x, w, b, torch.zeros_like(w), torch.ones_like(w), True)[i] for i in range(3)]
    second = OPS.batch_norm_2d_forward(x, w, b, torch.zeros_like(w), torch.ones_like(w), True)
    assert all(torch.equal(a, c) for a, c in zip(first, second, strict=True))
    module = rk_torch.convert(torch.nn.BatchNorm2d(64).cuda())
    static = x.clone()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            module(static).float().sum().backward()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = module(static)
    before = module.running_mean.clone()
    graph.replay()
    torch.cuda.synchronize()
    direct = rk_torch.convert(torch.nn.BatchNorm2d(64).cuda())(static)
    assert torch.equal(out, direct) and not torch.equal(before, module.running_mean)


F = torch.nn.functional
# Training-mode forms, ours and torch's: (x, residual, weight, bias, running statistics) -> y.
TANGENT_FORMS = {
    "batch norm": (lambda x, r, w, b, s: rk_torch.batch_norm_2d(x, *s, w, b, True),
                   lambda x, r, w, b, s: F.batch_norm(x, *s, w, b, True)),
    "+ silu": (lambda x, r, w, b, s: rk_torch.batch_norm_act_2d(x, *s, w, b, act="silu"),
               lambda x, r, w, b, s: F.silu(F.batch_norm(x, *s, w, b, True))),
    "+ relu6": (lambda x, r, w, b, s: rk_torch.batch_norm_act_2d(x, *s, w, b, act="relu6"),
                lambda x, r, w, b, s: F.relu6(F.batch_norm(x, *s, w, b, True))),
    "+ hardswish": (lambda x, r, w, b, s: rk_torch.batch_norm_act_2d(x, *s, w, b, act="hardswish"),
                    lambda x, r, w, b, s: F.hardswish(F.batch_norm(x, *s, w, b, True))),
    "+ residual, relu": (lambda x, r, w, b, s: rk_torch.batch_norm_add_relu_2d(x, r, *s, w, b),
                         lambda x, r, w, b, s: torch.relu(F.batch_norm(x, *s, w, b, True) + r)),
}  # fmt: skip


@pytest.mark.parametrize("memory_format", [torch.contiguous_format, torch.channels_last], ids=["nchw", "cl"])
def test_forward_mode_ad_in_training_mode_gives_torchs_tangents(memory_format):
    """Dual tensors (torch.autograd.forward_ad) through each training form: y and its tangent along x, the
    residual, weight and bias (the batch statistics moving with x) are torch's (f64)."""
    from torch.autograd import forward_ad

    generator = torch.Generator().manual_seed(4)

    def draw(*shape):
        return torch.randn(*shape, generator=generator, dtype=torch.float64)

    activations = [draw(3, 4, 3, 5).contiguous(memory_format=memory_format) for _ in range(2)]
    primals = [*activations, draw(4).abs() + 0.5, draw(4)]
    tangents = [torch.randn_like(p) for p in primals]
    for name, forms in TANGENT_FORMS.items():
        got = []
        for form in forms:
            statistics = (torch.zeros(4, dtype=torch.float64), torch.ones(4, dtype=torch.float64))
            with forward_ad.dual_level():
                duals = [forward_ad.make_dual(p, t) for p, t in zip(primals, tangents, strict=True)]
                got.append(forward_ad.unpack_dual(form(*duals, statistics)))
        (ours, theirs) = got
        assert ours.tangent is not None and ours.tangent.is_contiguous(memory_format=memory_format), name
        torch.testing.assert_close(ours.primal, theirs.primal, msg=name)
        torch.testing.assert_close(ours.tangent, theirs.tangent, msg=name)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("memory_format", [torch.contiguous_format, torch.channels_last], ids=["nchw", "cl"])
def test_gradient_penalty_matches_torchs(device, memory_format):
    """Double backward (f32): a gradient penalty ||dL/dx||^2 through a converted fused BN + ReLU and a plain BN,
    differentiated again, gives torch's gradients for the parameters and the input."""
    torch.manual_seed(2)
    model = torch.nn.Sequential(torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.BatchNorm2d(8)).to(device)
    ours = rk_torch.convert(copy.deepcopy(model), fuse=True)
    data = torch.randn(4, 8, 6, 5, device=device).contiguous(memory_format=memory_format)
    grads = []
    for side in (model, ours):
        x = data.clone().requires_grad_()
        (dx,) = torch.autograd.grad(side(x).square().sum(), x, create_graph=True)
        dx.square().sum().backward()
        grads.append([x.grad, *(p.grad for p in side.parameters())])
    for got, want in zip(grads[1], grads[0], strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_gpu_training_compiles_fullgraph_with_inductor():
    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU()).cuda()
    ours = rk_torch.convert(copy.deepcopy(model))
    compiled = torch.compile(ours, fullgraph=True)
    x = torch.randn(8, 3, 16, 16, device="cuda")
    torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(ours[1].running_var, model[1].running_var)


@pytest.mark.gpu
def test_gpu_training_runs_under_torch_compile_cuda_graphs():
    """mode="reduce-overhead" (CUDA graph trees) over a residual block of our fused BatchNorms (bf16 activations, f32
    parameters): three steps (warm-up, capture, replay) should give what the same modules give eagerly on the same
    kernels. The trees' warm-up and capture refuse live memory in the graph's pool other than its outputs."""

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bn1, self.bn2 = torch.nn.BatchNorm2d(64), torch.nn.BatchNorm2d(64)

        def forward(self, x):
            return torch.relu(self.bn2(torch.relu(self.bn1(x))) + x)

    torch._dynamo.reset()
    torch.manual_seed(0)
    eager = rk_torch.convert(Block().cuda(), fuse=True)
    ours = copy.deepcopy(eager)
    compiled = torch.compile(ours, mode="reduce-overhead")
    data = torch.randn(32, 64, 28, 28, device="cuda", dtype=torch.bfloat16)
    data = data.contiguous(memory_format=torch.channels_last)
    x, x_eager = data.clone().requires_grad_(), data.clone().requires_grad_()
    for _ in range(3):  # gradients set to None each step, as a training loop does: a graph's outputs are reused
        for model, leaf in ((ours, x), (eager, x_eager)):
            model.zero_grad(set_to_none=True)
            leaf.grad = None
        torch.compiler.cudagraph_mark_step_begin()
        got = compiled(x)
        got.float().sum().backward()
        got, grads = got.clone(), {name: p.grad.clone() for name, p in ours.named_parameters()}
        want = eager(x_eager)
        want.float().sum().backward()
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(x.grad, x_eager.grad)
    for name, value in eager.named_parameters():
        torch.testing.assert_close(grads[name], value.grad)
    for name, value in eager.named_buffers():
        torch.testing.assert_close(ours.get_buffer(name), value)


def test_the_rule_takes_the_cooperative_kernels_on_mid_sized_channels_last_tensors(monkeypatch):
    """channels_last from COOPERATIVE_RULE_BYTES of x while a direction's second read fits COOPERATIVE_RULE_READ: the
    cooperative kernels at two CTAs an SM, column blocks of at most 32 channels; not where the one-launch column
    kernels are the rule's, past the L2 bound, in NCHW, with RUST_KERNELS_PERSISTENT=0, nor for the add + ReLU
    backward (whose op does not run them)."""
    from rust_kernels.families.batch_norm import residual, training
    from rust_kernels.runtime import Placement, Problem

    def kernel(which, shape, dtype="bf16", channels_last=True):
        order = (0, 2, 3, 1) if channels_last else None
        problem = Problem(shape=shape, dtype=dtype, param="f32", values={}, scalars={}, order=order)
        return training.choose(which, problem, Placement(16, 132))

    mid = kernel("backward", (128, 672, 7, 7))
    assert isinstance(mid.kernel, training.COOPERATIVE["backward", False])
    cols = dict(mid.values)["COLS"]
    assert cols * 8 <= training.COOPERATIVE_RULE_CHANNELS and mid.grid[0] * mid.grid[1] <= 2 * 132
    assert isinstance(kernel("forward", (32, 256, 28, 28)).kernel, training.COOPERATIVE["forward", False])
    assert len(kernel("backward", (32, 256, 28, 28)).launches) == 2, "dy and x: 25.7 MB, past COOPERATIVE_RULE_READ"
    assert isinstance(kernel("forward", (32, 544, 7, 7)).kernel, tuple(training.FUSED_COLUMNS.values()))
    nchw = kernel("forward", (128, 672, 7, 7), channels_last=False)
    assert not training.reads_channels_last(nchw.kernel)
    problem = Problem(shape=(128, 672, 7, 7), dtype="bf16", param="f32", values={}, scalars={}, order=(0, 2, 3, 1))
    masked = residual._choose_backward(problem, Placement(16, 132))
    assert all(isinstance(p.kernel, residual.BACKWARD_KERNELS) for p in masked.launches)
    monkeypatch.setenv("RUST_KERNELS_PERSISTENT", "0")
    assert len(kernel("backward", (128, 672, 7, 7)).launches) == 2
