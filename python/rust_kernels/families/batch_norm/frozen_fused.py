"""BatchNorm2d with frozen running statistics (eval mode) fused with what follows it in a model: an activation (y =
act(BN(x)), act ReLU, SiLU, ReLU6 or Hardswish) or the residual add and ReLU that end a ResNet block (y = relu(BN(x) +
residual)). NCHW or channels_last, y in x's memory format.

Forward: one elementwise launch (batch_norm_2d_frozen_forward_act, _add_relu), shaped as the training normalize's
(at H*W = 1 as the eval forward's, reading rows of C in packs): 2 passes for BN + act where the two apart take 4, 3
for BN + add + ReLU where they take 7 (an in-place ReLU).
Backward of BN + act: one launch through the activation's gradient at z = BN(x), recomputed from x as the forward
computed it (batch_norm_2d_nchw_backward_split_act, batch_norm_2d_frozen_backward_channels_last_act; where no 16-byte
pack divides NCHW rows, batch_norm_2d_frozen_backward_grouped_act, the rule's on many channels): 3 passes where the
activation's backward then BN's take 6; nothing but x is saved. Backward of BN + add + ReLU: the training one's
mask launch (dresidual = 0 where y <= 0, else dy), then the eval backward's launch reading dresidual in dy's stead.
"""

from __future__ import annotations

from typing import Any

from rust_kernels.families.batch_norm import activation, backward, common, forward, frozen, residual, training
from rust_kernels.kernels import (  # type: ignore[attr-defined]
    BatchNorm2dAddReluMask,
    BatchNorm2dFrozenForwardAct,
    BatchNorm2dFrozenForwardAddRelu,
)
from rust_kernels.runtime import Gradient, Input, Op, Output, Placement, Plan, Problem

ACT_FORWARD_KERNELS = (BatchNorm2dFrozenForwardAct, frozen.PACKED[BatchNorm2dFrozenForwardAct])
ACT_BACKWARD_KERNELS = (
    backward.BatchNorm2dNchwBackwardSplitAct,
    backward.BatchNorm2dFrozenBackwardGroupedAct,
    frozen.BatchNorm2dFrozenBackwardChannelsLastAct,
)
ADD_RELU_FORWARD_KERNELS = (BatchNorm2dFrozenForwardAddRelu, frozen.PACKED[BatchNorm2dFrozenForwardAddRelu])
ADD_RELU_BACKWARD_KERNELS = (BatchNorm2dAddReluMask, *backward.KERNELS, *frozen.BACKWARD_KERNELS)


def _layout(problem: Problem, placement: Placement) -> tuple[Any, ...]:
    """(shape, dtype, param, alignment, sms, channels_last) of a call."""
    return (problem.shape, problem.dtype, problem.param, placement.alignment, placement.sms, problem.order is not None)


# --- forward ---------------------------------------------------------------------------------------------------------
def _launch(kind: type, problem: Problem, placement: Placement, channels_last: bool, ctas: int | None = None,
            packed: bool = True) -> Plan:  # fmt: skip
    """The elementwise launch of `kind` reading `channels_last` memory in the widest pack the arrays allow, on `ctas`
    CTAs, by default the training normalize's grid, for channels_last the eval forward's (frozen.forward_grid), fusing
    the call's activation where `kind` has one; with `packed`, its coefficients in packs where the parameters'
    alignment allows (frozen.elementwise)."""
    shape, dtype, param, alignment, sms, _ = _layout(problem, placement)
    mode = training.elementwise_mode(shape, dtype, alignment, channels_last)
    if ctas is None and channels_last:
        ctas = frozen.forward_grid(shape, dtype, mode, sms)
    fused = training.activation_of(problem)
    coefficients = placement.coefficients if packed else 0
    return frozen.elementwise(kind, shape, dtype, param, mode, channels_last, sms, ctas, fused, coefficients)


def _forward(kind: type, problem: Problem, placement: Placement) -> Plan:
    """The launch in the arrays' memory format on _launch's grid; at H*W = 1 the eval forward's
    (forward.nhwc_launch: the channels_last kernel, rows of C in packs, from forward.NHWC_MIN_BYTES on)."""
    shape, dtype, _, alignment, _, channels_last = _layout(problem, placement)
    if not channels_last and (nhwc := forward.nhwc_launch(shape, dtype, alignment)):
        return _launch(kind, problem, placement, True, nhwc[1])
    return _launch(kind, problem, placement, channels_last)


def _forward_candidates(kind: type, problem: Problem, placement: Placement) -> tuple[Plan, ...]:
    """The rule's plan, then per memory format the kernels may read (both where H*W = 1) the grids at half, once
    and twice the training normalize's and those giving each thread frozen.UNITS_PER_THREAD units (the frozen
    forward's candidates), each with and without the coefficients in packs where they may be."""
    shape, dtype, _, alignment, sms, channels_last = _layout(problem, placement)
    out = [_forward(kind, problem, placement)]
    for layout in common.layouts(shape, channels_last):
        mode = training.elementwise_mode(shape, dtype, alignment, layout)
        grids = (*training.grids_around(shape, dtype, mode, layout, sms),
                 *frozen.thread_grids(shape, dtype, mode, layout))  # fmt: skip
        out += [_launch(kind, problem, placement, layout, ctas, packed) for ctas in grids for packed in (True, False)]
    return tuple(dict.fromkeys(out))


# --- backward ---------------------------------------------------------------------------------------------------------
def _backward(problem: Problem, placement: Placement, activation: int) -> Plan:
    """The eval backward's (deterministic) plan in the problem's layout, through `activation`'s gradient (0: none)."""
    shape, dtype, param, alignment, sms, channels_last = _layout(problem, placement)
    if channels_last:
        return frozen.plan("backward", shape, dtype, param, alignment, sms, activation)
    return backward.plan(shape, dtype, param, alignment, sms, activation=activation)


def _backward_candidates(problem: Problem, placement: Placement, activation: int) -> tuple[Plan, ...]:
    """The eval backward's (deterministic) candidates in the problem's layout, through `activation`'s gradient."""
    shape, dtype, param, alignment, sms, channels_last = _layout(problem, placement)
    if channels_last:
        return frozen._candidates("backward", shape, dtype, param, alignment, sms, activation)
    return backward._candidates(shape, dtype, param, alignment, sms, True, activation)


def _act_backward(problem: Problem, placement: Placement) -> Plan:
    return _backward(problem, placement, training.activation_of(problem))


def _act_backward_candidates(problem: Problem, placement: Placement) -> tuple[Plan, ...]:
    return _backward_candidates(problem, placement, training.activation_of(problem))


def _mask(problem: Problem, placement: Placement) -> Plan:
    return residual.mask(problem.shape, problem.dtype, placement.alignment, placement.sms)  # type: ignore[arg-type]


def _add_relu_backward(problem: Problem, placement: Placement) -> Plan:
    return residual.through_mask(_mask(problem, placement), _backward(problem, placement, 0))


def _add_relu_backward_candidates(problem: Problem, placement: Placement) -> tuple[Plan, ...]:
    """The mask launch before each of the eval backward's (deterministic) candidates."""
    first = _mask(problem, placement)
    return tuple(residual.through_mask(first, p) for p in _backward_candidates(problem, placement, 0))


def _fits_activation(plan: Plan, problem: Problem) -> str | None:
    """Why a forced plan cannot run this problem: a kernel fusing another activation than the call's, or reading
    the other memory format."""
    fused = training.activation_of(problem)
    for launch in plan.launches:
        if launch.kernel.activation != fused:
            return f"its kernel {launch.kernel.id} fuses activation {launch.kernel.activation}, the call {fused}"
    return training.layout_fits(plan, problem)


def _describe(name: str, same: tuple[str, ...], per_channel: tuple[str, ...]) -> Any:
    return common.describe(name, "x", same, per_channel, eval_channels_last=True)


ACT_FORWARD = Op(
    name="batch_norm_2d_act_eval_forward",
    doc="""y = act((x - running_mean) / sqrt(running_var + eps) * weight + bias), act `activation` ("relu", "silu",
    "relu6" or "hardswish"): BatchNorm2d with frozen running statistics (eval mode) and the activation after it in one
    pass. x NCHW or channels_last in memory, y in x's memory format; the parameters and statistics in x's dtype, or f32
    with bf16/f16 x (torch.autocast's pairing).""",
    inputs=(Input("x"), Input("weight"), Input("bias"), *common.STATISTICS),
    scalars=(common.EPS, activation.ACTIVATION),
    outputs=(Output("y", like="x"),),
    describe=_describe("batch_norm_2d_act_eval_forward", ("x",), common.PARAMETERS),
    choose=lambda problem, placement: _forward(BatchNorm2dFrozenForwardAct, problem, placement),
    candidates=lambda problem, placement: _forward_candidates(BatchNorm2dFrozenForwardAct, problem, placement),
    kernels=ACT_FORWARD_KERNELS,
    aligned=("x", "y"),
    coefficients=common.PARAMETERS,
    orders=common.native_orders,
    fits=_fits_activation,
    torch=True,
    gradient=Gradient(
        "batch_norm_2d_act_eval_backward", grads={"dy": "y"}, gives={"dx": "x", "dweight": "weight", "dbias": "bias"}
    ),
)

ACT_BACKWARD = Op(
    name="batch_norm_2d_act_eval_backward",
    doc="""(dx, dweight, dbias) of batch_norm_2d_act_eval_forward from dy (the gradient of y): g = act'(z) * dy at z =
    (x - running_mean) / sqrt(running_var + eps) * weight + bias (recomputed from x as the forward computed it), then
    as batch_norm_2d_backward(..., training=False) of g, in one pass: dx = g * weight * invstd, dweight = sum(g * (x -
    running_mean)) * invstd, dbias = sum(g). Sums in a fixed order: bit-identical run to run.""",
    inputs=(Input("dy"), Input("x"), Input("weight"), Input("bias"), *common.STATISTICS),
    scalars=(common.EPS, activation.ACTIVATION),
    outputs=backward.OUTPUTS,
    describe=_describe("batch_norm_2d_act_eval_backward", ("x", "dy"), common.PARAMETERS),
    choose=_act_backward,
    candidates=_act_backward_candidates,
    kernels=ACT_BACKWARD_KERNELS,
    aligned=("dy", "x", "dx"),
    orders=common.native_orders,
    fits=_fits_activation,
    torch=True,
)

ADD_RELU_FORWARD = Op(
    name="batch_norm_2d_add_relu_eval_forward",
    doc="""y = relu((x - running_mean) / sqrt(running_var + eps) * weight + bias + residual): BatchNorm2d with frozen
    running statistics (eval mode), the residual add and the ReLU that end a ResNet block, in one pass, rounded once.
    x and residual NCHW or channels_last in memory (both alike), y in x's memory format; dtypes as
    batch_norm_2d_act_eval_forward's.""",
    inputs=(Input("x"), Input("residual"), Input("weight"), Input("bias"), *common.STATISTICS),
    scalars=(common.EPS,),
    outputs=(Output("y", like="x"),),
    describe=_describe("batch_norm_2d_add_relu_eval_forward", ("x", "residual"), common.PARAMETERS),
    choose=lambda problem, placement: _forward(BatchNorm2dFrozenForwardAddRelu, problem, placement),
    candidates=lambda problem, placement: _forward_candidates(BatchNorm2dFrozenForwardAddRelu, problem, placement),
    kernels=ADD_RELU_FORWARD_KERNELS,
    aligned=("x", "residual", "y"),
    coefficients=common.PARAMETERS,
    orders=common.native_orders,
    fits=training.layout_fits,
    torch=True,
    gradient=Gradient("batch_norm_2d_add_relu_eval_backward", grads={"dy": "y"}, gives=residual.GIVES),
)

ADD_RELU_BACKWARD = Op(
    name="batch_norm_2d_add_relu_eval_backward",
    doc="""(dx, dresidual, dweight, dbias) of batch_norm_2d_add_relu_eval_forward from dy (the gradient of y) and its
    output y: dresidual = 0 where y <= 0, else dy (torch's threshold_backward), then batch_norm_2d_backward(...,
    training=False) of dresidual. Sums in a fixed order: bit-identical run to run.""",
    inputs=(Input("dy"), Input("y"), Input("x"), Input("weight"), *common.STATISTICS),
    scalars=(common.EPS,),
    outputs=residual.BACKWARD_OUTPUTS,
    describe=_describe(
        "batch_norm_2d_add_relu_eval_backward", ("x", "dy", "y"), common.PARAMETERS[:1] + common.PARAMETERS[2:]
    ),
    choose=_add_relu_backward,
    candidates=_add_relu_backward_candidates,
    kernels=ADD_RELU_BACKWARD_KERNELS,
    aligned=("dy", "y", "x", "dx", "dresidual"),
    orders=common.native_orders,
    fits=residual.fits_backward,
    torch=True,
)

OPS = (ACT_BACKWARD, ACT_FORWARD, ADD_RELU_BACKWARD, ADD_RELU_FORWARD)
