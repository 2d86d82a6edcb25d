"""BatchNorm2d in training mode with the residual add and ReLU that end a ResNet block fused: y = relu(BN(x) +
residual) (torchvision's Bottleneck and BasicBlock: bn3 or bn2, `out += identity`, relu).

Forward: the training forward's statistics launch, then batch_norm_2d_normalize_add_relu (reads x and residual,
writes y): 4 passes over the activations where BN, the add and an in-place ReLU apart take 8 (3 + 3 + 2). Backward:
batch_norm_2d_add_relu_mask (dresidual = 0 where y <= 0, else dy: reads dy and y, writes dresidual), then the training
backward's launches (two, or one where the rule takes the one-launch kernels) reading dresidual in dy's stead: 8
passes, as torch's threshold_backward then BN's backward take (a reduction writing dresidual as it reads dy and y
would take 7: not built). y is saved for the backward, as torch's ReLU saves its output."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from rust_kernels.families.batch_norm import activation, common, forward, training
from rust_kernels.kernels import (  # type: ignore[attr-defined]
    BatchNorm2dAddReluMask,
    BatchNorm2dBackwardElementwise,
    BatchNorm2dBackwardReduce,
    BatchNorm2dBatchStats,
    BatchNorm2dNormalizeAddRelu,
)
from rust_kernels.runtime import Gradient, Input, Op, Output, Placement, Plan, Problem

# The training backward's launches read the mask launch's output in dy's stead.
READS = (("dy_ptr", "dresidual"),)
GIVES = {"dx": "x", "dresidual": "residual", "dweight": "weight", "dbias": "bias"}  # the backward's gradients
BACKWARD_OUTPUTS = (Output("dx", like="x"), Output("dresidual", like="x"), Output("dweight", like="weight", sum=True),
                    Output("dbias", like="weight", sum=True))  # fmt: skip
FORWARD_KERNELS = (BatchNorm2dBatchStats, BatchNorm2dNormalizeAddRelu)
BACKWARD_KERNELS = (BatchNorm2dAddReluMask, BatchNorm2dBackwardReduce, BatchNorm2dBackwardElementwise,
                    training.FUSED["backward", False], training.FUSED_COLUMNS["backward", False],
                    training.WARP["backward", False], training.WARP_CHANNELS_LAST["backward", False],
                    training.BLOCK["backward", False])  # fmt: skip


def forward_plan(shape: common.Shape4, dtype: str, param: str, vectorized: int, channels_last: bool, sms: int,
                 split: int | None = None, ctas: int | None = None, activation: int = 0, packs: int | None = None
                 ) -> Plan:  # fmt: skip
    """The statistics launch, then the normalize launch with the residual added and the ReLU (`activation`: the
    signature training.around builds with; none is fused besides the ReLU), in pack mode `packs` where given."""
    return training.forward(shape, dtype, param, vectorized, channels_last, sms, split, ctas,
                            normalize=BatchNorm2dNormalizeAddRelu, packs=packs)  # fmt: skip


def mask(shape: common.Shape4, dtype: str, alignment: int, sms: int) -> Plan:
    """The mask launch: the tensor as one stream of elements or 16-byte packs (either memory format), on the
    elementwise launches' NCHW grid."""
    lanes = common.unit_elements(1, dtype)
    vectorized = int(alignment % 16 == 0 and math.prod(shape) % lanes == 0)
    ctas = training.elementwise_grid(shape, dtype, vectorized, False, sms)
    kernel = BatchNorm2dAddReluMask(training.ELEMENTWISE_BLOCK, vectorized, dtype=dtype)
    return Plan(kernel, (ctas, 1, 1), (("CTAS", ctas),))


def through_mask(first: Plan, gradient: Plan) -> Plan:
    """The mask launch `first`, then a training backward plan's launches reading dresidual in dy's stead."""
    return dataclasses.replace(first, then=tuple(dataclasses.replace(p, then=(), reads=READS)
                                                 for p in gradient.launches))  # fmt: skip


def gradient_of(plan: Plan) -> Plan:
    """The training backward plan a backward plan runs after its mask launch (its launches as they read)."""
    first, *rest = plan.launches[1:]
    return Plan(first.kernel, first.grid, first.values, first.workspaces, tuple(rest), first.reads)


def _forward_args(problem: Problem, placement: Placement) -> tuple[Any, ...]:
    return (problem.shape, problem.dtype, problem.param, placement.alignment, placement.sms, problem.order is not None)


def _choose_forward(problem: Problem, placement: Placement) -> Plan:
    """The two launches in the arrays' memory format; at H*W = 1 from training.NHWC_MIN_BYTES of x on the
    channels_last ones (rows of C in packs), as the training rule."""
    shape, dtype, param, alignment, sms, channels_last = _forward_args(problem, placement)
    channels_last = channels_last or common.nhwc_rule(shape, dtype, training.NHWC_MIN_BYTES)
    vectorized = training.vector_mode(shape, dtype, alignment, channels_last)
    packs = training.elementwise_mode(shape, dtype, alignment, channels_last)
    return forward_plan(shape, dtype, param, vectorized, channels_last, sms, packs=packs)


def _candidates_forward(problem: Problem, placement: Placement) -> tuple[Plan, ...]:
    """The rule's plan, then the statistics' splits by the normalize launch's grids around the rule's, in each memory
    format the kernels may read (both where H*W = 1)."""
    shape, dtype, param, alignment, sms, channels_last = _forward_args(problem, placement)
    around = [p for layout in common.layouts(shape, channels_last)
              for p in training.around(forward_plan, shape, dtype, param, alignment, sms, layout)]  # fmt: skip
    return tuple(dict.fromkeys([_choose_forward(problem, placement), *around]))


def _choose_backward(problem: Problem, placement: Placement) -> Plan:
    first = mask(problem.shape, problem.dtype, placement.alignment, placement.sms)  # type: ignore[arg-type]
    return through_mask(first, training.choose("backward", problem, placement, cooperative_on=False))


def runs(gradient: Plan) -> bool:
    """Whether this op runs a training backward plan's kernels behind its mask launch (BACKWARD_KERNELS: not the
    persistent or cooperative ones, which it refuses)."""
    return all(isinstance(launch.kernel, BACKWARD_KERNELS) for launch in gradient.launches)


def _candidates_backward(problem: Problem, placement: Placement) -> tuple[Plan, ...]:
    """The mask launch before each of the training backward's candidates that this op runs."""
    first = mask(problem.shape, problem.dtype, placement.alignment, placement.sms)  # type: ignore[arg-type]
    return tuple(through_mask(first, p) for p in training.candidates("backward", problem, placement) if runs(p))


def fits_backward(plan: Plan, problem: Problem) -> str | None:
    """A forced backward plan: the mask launch, then launches reading dresidual in dy's stead, in the arrays'
    memory format (any other order would read dresidual before it is written). The eval-mode op's too."""
    first, *rest = plan.launches
    if not isinstance(first.kernel, BatchNorm2dAddReluMask) or not rest or \
            any(isinstance(p.kernel, BatchNorm2dAddReluMask) or p.reads != READS for p in rest):  # fmt: skip
        return ("expected the mask launch (batch_norm_2d_add_relu_mask), then the backward's launches reading "
                "dresidual in dy's stead (residual.through_mask builds it)")  # fmt: skip
    return training.layout_fits(gradient_of(plan), problem)


def _orders(scalars: dict[str, Any]) -> tuple[tuple[int, ...], ...]:
    return (common.CHANNELS_LAST,)


FORWARD = Op(
    name="batch_norm_2d_add_relu_forward",
    doc="""(y, save_mean, save_invstd) of relu(BatchNorm2d(x) + residual) in training mode: batch_norm_2d_forward(...,
    training=True)'s statistics (running_mean and running_var updated in place with `momentum`), then y =
    relu((x - mean) * invstd * weight + bias + residual) in one pass, rounded once. x and residual NCHW or
    channels_last in memory (both alike), y in x's memory format; dtypes as batch_norm_2d_forward's.""",
    inputs=(Input("x"), Input("residual"), Input("weight"), Input("bias"), *common.MUTATED_STATISTICS),
    scalars=(common.MOMENTUM, common.EPS),
    outputs=(
        Output("y", like="x"),
        Output("save_mean", like="running_mean", shape=forward._saved, sum=True, dtype=forward._acc),
        Output("save_invstd", like="running_mean", shape=forward._saved, sum=True, dtype=forward._acc),
    ),
    describe=common.training_mode(
        common.describe(
            "batch_norm_2d_add_relu_forward", "x", ("x", "residual"), ("weight", "bias", "running_mean", "running_var")
        )
    ),
    choose=_choose_forward,
    candidates=_candidates_forward,
    kernels=FORWARD_KERNELS,
    aligned=("x", "residual", "y"),
    orders=_orders,
    fits=training.layout_fits,
    torch=True,
    gradient=Gradient("batch_norm_2d_add_relu_backward", grads={"dy": "y"}, gives=GIVES),
)

BACKWARD = Op(
    name="batch_norm_2d_add_relu_backward",
    doc="""(dx, dresidual, dweight, dbias) of relu(BatchNorm2d(x) + residual) in training mode from dy (the gradient
    of y), the forward's output y and its save_mean and save_invstd: dresidual = 0 where y <= 0, else dy (torch's
    threshold_backward), then the gradient through the batch statistics of dresidual, as batch_norm_2d_backward(...,
    training=True) of it. Sums in a fixed order: bit-identical run to run.""",
    inputs=(Input("dy"), Input("y"), Input("x"), Input("weight"), *activation.SAVED),
    scalars=(common.EPS,),
    outputs=BACKWARD_OUTPUTS,
    describe=common.training_mode(
        common.describe(
            "batch_norm_2d_add_relu_backward", "x", ("x", "dy", "y"), ("weight",), ("save_mean", "save_invstd")
        )
    ),
    choose=_choose_backward,
    candidates=_candidates_backward,
    kernels=BACKWARD_KERNELS,
    aligned=("dy", "y", "x", "dx", "dresidual"),
    orders=_orders,
    fits=fits_backward,
    torch=True,
)

OPS = (BACKWARD, FORWARD)
