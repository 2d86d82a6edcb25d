"""Eval mode (frozen running statistics) over channels_last arrays: the torch-native ops read NHWC memory as it is
(batch_norm_2d_frozen_forward_channels_last, batch_norm_2d_frozen_backward_channels_last) and give what the NCHW
eval ops give on the same values, outputs in the input's memory format; the errors; rust_kernels.torch's modules on
them; on the GPU, against float64 as closely as torch's own eval batch norm. The float64 cross-checks of every plan
are the registry's (families batch_norm_2d_forward_eval and batch_norm_2d_backward_eval)."""

import math

import numpy as np
import pytest

from rust_kernels import ArgumentError, ops
from rust_kernels.families.batch_norm import backward, common, forward, frozen, frozen_fused, training
from rust_kernels.runtime import Placement

EPS = 1e-5
SHAPE = (3, 16, 5, 4)  # C = 16: 16-byte packs of f32 (4 lanes); 2 of bf16 (8 lanes)


def channels_last(a: np.ndarray) -> np.ndarray:
    """The NHWC buffer of `a` behind its NCHW shape (what a channels_last tensor is)."""
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


def is_channels_last(a: np.ndarray) -> bool:
    return not a.flags.c_contiguous and a.transpose(0, 2, 3, 1).flags.c_contiguous


def inputs(dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    c = SHAPE[1]
    dy, x = rng.standard_normal(SHAPE).astype(dtype), (rng.standard_normal(SHAPE) * 2 + 0.5).astype(dtype)
    weight, bias = rng.uniform(0.5, 1.5, c).astype(dtype), rng.standard_normal(c).astype(dtype)
    mean, var = rng.standard_normal(c).astype(dtype), rng.uniform(0.5, 2.0, c).astype(dtype)
    return dy, x, weight, bias, mean, var


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_native_ops_read_channels_last_in_eval_mode_as_the_nchw_ops_compute(dtype):
    """y and dx bit for bit as the NCHW eval kernels give them (the same per-element arithmetic), dweight and dbias
    to rounding (other summation orders), y and dx channels_last; the statistics untouched, saved ones empty."""
    dy, x, weight, bias, mean, var = inputs(dtype)
    y_nchw = ops.batch_norm_2d_nchw_forward_inference(x, weight, bias, mean, var, eps=EPS, backend="host")
    grads_nchw = ops.batch_norm_2d_nchw_backward(dy, x, weight, mean, var, eps=EPS, backend="host")
    kept = (mean.copy(), var.copy())
    y, save_mean, save_invstd = ops.batch_norm_2d_forward(channels_last(x), weight, bias, mean, var, False, 0.1, EPS,
                                                          backend="host")  # fmt: skip
    dx, dweight, dbias = ops.batch_norm_2d_backward(channels_last(dy), channels_last(x), weight, mean, var, None,
                                                    None, False, EPS, backend="host")  # fmt: skip
    assert is_channels_last(y) and is_channels_last(dx)
    assert np.array_equal(y, y_nchw) and np.array_equal(dx, grads_nchw[0])
    np.testing.assert_allclose(dweight, grads_nchw[1], rtol=1e-5 if dtype == np.float32 else 1e-13)
    np.testing.assert_allclose(dbias, grads_nchw[2], rtol=1e-5 if dtype == np.float32 else 1e-13, atol=1e-6)
    assert save_mean.shape == save_invstd.shape == (0,)
    assert np.array_equal(mean, kept[0]) and np.array_equal(var, kept[1])


def test_the_plans_take_the_channels_last_eval_kernels_in_one_launch_each():
    dy, x, weight, bias, mean, var = inputs()
    calls = {
        forward.NATIVE: (channels_last(x), weight, bias, mean, var),
        backward.NATIVE: (channels_last(dy), channels_last(x), weight, mean, var, None, None),
    }
    for op, args in calls.items():
        scalars = tuple({"training": False}.get(s.name, s.default) for s in op.scalars)
        named, problem = op.problem(args, scalars, "host")
        plan = op.plan_for(named, problem, "host")
        assert not plan.then and isinstance(plan.kernel, frozen.FORWARD_KERNELS + frozen.BACKWARD_KERNELS)
        assert plan.kernel.vectorized == 1  # C = 16 f32: 16-byte packs


def test_channels_last_errors_name_the_argument_and_the_op_that_reads_it():
    dy, x, weight, bias, mean, var = inputs()
    refused = r"x: channels_last arrays are not read by batch_norm_2d_nchw_forward_inference .*batch_norm_2d_forward"
    with pytest.raises(ArgumentError, match=refused):
        ops.batch_norm_2d_nchw_forward_inference(channels_last(x), weight, bias, mean, var, backend="host")
    with pytest.raises(ArgumentError, match=r"dy: expected a channels_last array like x"):
        ops.batch_norm_2d_backward(dy, channels_last(x), weight, mean, var, None, None, False, backend="host")
    frozen_plan = frozen.plan("forward", SHAPE, "f32", "f32", 16, 1)
    refused = r"plan: its kernel batch_norm_2d_frozen_forward_channels_last__f32__256__1__1 reads the other memory"
    with pytest.raises(ArgumentError, match=refused + r" format than the arrays' \(NCHW\)"):
        ops.batch_norm_2d_forward(x, weight, bias, mean, var, False, backend="host", plan=frozen_plan)
    nchw_plan = forward.plan(SHAPE, "f32", "f32", 16, 1)
    with pytest.raises(ArgumentError, match=r"reads the other memory format than the arrays' \(channels_last\)"):
        ops.batch_norm_2d_forward(channels_last(x), weight, bias, mean, var, False, backend="host", plan=nchw_plan)
    with pytest.raises(ArgumentError, match=r"plan: its kernel .* is not one of training mode's"):
        ops.batch_norm_2d_forward(channels_last(x), weight, bias, mean, var, True, backend="host", plan=frozen_plan)
    # 24 channels of single elements: one CTA of 256 threads cannot keep each thread on one column (256 % 24 != 0).
    x24, ones = channels_last(np.ones((2, 24, 3, 3), np.float32)), np.ones(24, np.float32)
    one_cta = frozen.forward((2, 24, 3, 3), "f32", "f32", 0, 1, ctas=1)
    with pytest.raises(ArgumentError, match=r"CTAS \* BLOCK must be a multiple of C"):
        ops.batch_norm_2d_forward(x24, ones, ones, ones, ones, False, backend="host", plan=one_cta)


def test_the_forwards_load_their_coefficients_in_packs_where_the_parameters_are_aligned_to_them():
    """Parameters aligned to x's packs: the _packed kernels, a thread's weight, bias and statistics in packs; 4 bytes
    past a 16-byte boundary (views into a larger array): the kernels loading them one at a time, x still in packs.
    y bit for bit the NCHW op's either way; a packed plan forced on such parameters is refused, naming them."""
    _, x, *params = inputs()
    shifted = [np.concatenate((a[:1], a))[1:] for a in params]  # the same values at an address 4 bytes further
    assert all(a.ctypes.data % 16 == 4 for a in shifted) and all(a.ctypes.data % 16 == 0 for a in params)
    y_nchw = ops.batch_norm_2d_nchw_forward_inference(x, *params, eps=EPS, backend="host")
    residual = channels_last(np.ones(SHAPE, np.float32))
    calls = [(forward.NATIVE, (channels_last(x),), (False, 0.1, EPS)),
             (frozen_fused.ACT_FORWARD, (channels_last(x),), (EPS, "relu")),
             (frozen_fused.ADD_RELU_FORWARD, (channels_last(x), residual), (EPS,))]  # fmt: skip
    for op, streamed, scalars in calls:
        ys = []
        for per_channel, packed in ((params, True), (shifted, False)):
            named, problem = op.problem((*streamed, *per_channel), scalars, "host")
            plan = op.plan_for(named, problem, "host")
            assert plan.kernel.vectorized == 1 and (type(plan.kernel) in frozen.PACKED.values()) == packed, plan.label
            out = op(*streamed, *per_channel, *scalars, backend="host")
            ys.append(out[0] if isinstance(out, tuple) else out)
        assert np.array_equal(*ys), op.name
    y = ops.batch_norm_2d_forward(channels_last(x), *shifted, False, 0.1, EPS, backend="host")[0]
    assert np.array_equal(y, y_nchw)
    # NCHW at H*W = 1 from forward.NHWC_MIN_BYTES: the channels_last kernel over rows of C, so likewise
    rows = np.random.default_rng(1).standard_normal((forward.NHWC_MIN_BYTES // 4 // 256, 256, 1, 1), np.float32)
    wide = [np.tile(a, 16) for a in params]
    ys = []
    for per_channel, packed in ((wide, True), ([np.concatenate((a[:1], a))[1:] for a in wide], False)):
        named, problem = forward.NCHW.problem((rows, *per_channel), (EPS, None), "host")
        kernel = forward.NCHW.plan_for(named, problem, "host").kernel
        assert isinstance(kernel, frozen.FORWARD_KERNELS) and (type(kernel) in frozen.PACKED.values()) == packed
        ys.append(ops.batch_norm_2d_nchw_forward_inference(rows, *per_channel, eps=EPS, backend="host"))
    assert np.array_equal(*ys)
    packed = frozen.plan("forward", SHAPE, "f32", "f32", 16, 1, coefficients=16)
    assert type(packed.kernel) is frozen.PACKED[frozen.BatchNorm2dFrozenForwardChannelsLast]
    refused = r"weight, bias, running_mean and running_var 16-byte aligned"
    with pytest.raises(ArgumentError, match=refused):
        ops.batch_norm_2d_forward(channels_last(x), *shifted, False, 0.1, EPS, backend="host", plan=packed)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_the_forward_rule_gives_a_unit_a_thread_within_one_wave_and_at_least_four_past_it(dtype):
    """One wave of 2048-thread SMs: a unit a thread while the tensor's units fit it; past it the training normalize's
    grid where that gives a thread RULE_UNITS units (a step of the walk) or more, else RULE_UNITS a thread; the grid
    always a multiple of what keeps each thread on one column."""
    sms, lanes = 132, common.unit_elements(1, dtype)
    for shape in [(8, 1280, 7, 7), (32, 2048, 7, 7), (32, 1024, 14, 14), (128, 96, 56, 56), (1, 1024, 7, 7)]:
        units = math.prod(shape) // lanes
        ctas = frozen.plan("forward", shape, dtype, "f32", 16, sms).value("CTAS")
        per_thread = units / (ctas * 256)
        normalize = training.elementwise_grid(shape, dtype, 1, True, sms)
        if units <= sms * 2048:
            assert per_thread <= 1 and ctas == normalize
        else:
            assert per_thread > frozen.RULE_UNITS - 1 and ctas <= normalize
        assert ctas * 256 % (shape[1] // lanes) == 0
        assert ctas == frozen.forward_grid(shape, dtype, 1, sms)


def test_the_fused_eval_forwards_take_the_eval_forwards_grid_over_channels_last():
    """BN + ReLU and BN + add + ReLU in eval mode share the eval forward's walk, and its rule's grid."""
    shape, placement = (32, 2048, 7, 7), Placement(16, 132)
    x = channels_last(np.zeros(shape, np.float32))
    per_channel = [np.ones(shape[1], np.float32)] * 4
    for op, arrays, scalars in ((frozen_fused.ACT_FORWARD, (x, *per_channel), (EPS, "relu")),
                                (frozen_fused.ADD_RELU_FORWARD, (x, x, *per_channel), (EPS,))):  # fmt: skip
        _, problem = op.problem(arrays, scalars, "host")
        plan = op.choose(problem, placement)
        mode = plan.kernel.vectorized
        normalize = training.elementwise_grid(shape, "f32", mode, True, 132)
        assert plan.value("CTAS") == frozen.forward_grid(shape, "f32", mode, 132) != normalize


@pytest.mark.parametrize("shape", [(32, 2048, 7, 7), (8, 24, 3, 3), (1, 1000, 1, 2), (128, 96, 56, 56)], ids=str)
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_every_forward_candidate_keeps_each_thread_on_one_column(shape, dtype):
    """The autotuner's grids (the training normalize's and those giving each thread 4, 8 or 16 units) all meet the
    kernel's precondition: CTAS * BLOCK a multiple of the row's units."""
    plans = frozen._candidates("forward", shape, dtype, "f32", 16, 132)
    vectorized = plans[0].kernel.vectorized
    assert {p.value("CTAS") for p in plans} >= set(frozen.thread_grids(shape, dtype, vectorized))
    for plan in plans:
        groups = shape[1] // common.unit_elements(plan.kernel.vectorized, dtype)
        assert plan.value("CTAS") * plan.kernel.block_dim[0] % groups == 0, plan.label
