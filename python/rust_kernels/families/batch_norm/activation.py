"""BatchNorm2d in training mode with its activation fused: y = act(BN(x)), act ReLU, SiLU, ReLU6 or Hardswish (timm's
BatchNormAct2d, a torchvision block's BN + ReLU, MobileNetV2's BN + ReLU6, MobileNetV3's BN + Hardswish). The forward is
the training forward's two launches with the activation applied in the normalize launch (batch_norm_2d_normalize_act);
the backward the training backward's two launches through the activation's gradient
(batch_norm_2d_backward_{reduce,elementwise}_act), which recompute z = BN(x) from x exactly as the forward computed it:
neither y nor z is saved or read, so the pair moves the same bytes as BatchNorm2d alone (3 + 5 passes) where BN then act
costs 2 more forward and 3 more backward."""

from __future__ import annotations

from typing import Any

from rust_kernels.errors import ArgumentError
from rust_kernels.families.batch_norm import common, forward, training
from rust_kernels.runtime import Gradient, Input, Op, Output, Placement, Plan, Problem, Scalar


def check_activation(value: object) -> str:
    if not isinstance(value, str) or value not in training.ACTIVATIONS:
        raise ArgumentError(f"activation: expected one of {sorted(training.ACTIVATIONS)}, got {value!r}")
    return value


ACTIVATION = Scalar("activation", "relu", check_activation, "str")


def _orders(scalars: dict[str, Any]) -> tuple[tuple[int, ...], ...]:
    return (common.CHANNELS_LAST,)


def _plans(which: str) -> tuple[Any, Any]:
    def choose(problem: Problem, placement: Placement) -> Plan:
        return training.choose(which, problem, placement)

    def candidates(problem: Problem, placement: Placement) -> tuple[Plan, ...]:
        return training.candidates(which, problem, placement)

    return choose, candidates


_choose_forward, _candidates_forward = _plans("forward")
_choose_backward, _candidates_backward = _plans("backward")
SAVED = (Input("save_mean"), Input("save_invstd"))

FORWARD = Op(
    name="batch_norm_2d_act_forward",
    doc="""(y, save_mean, save_invstd) of act(BatchNorm2d(x)) in training mode, act `activation` ("relu", "silu",
    "relu6" or "hardswish"): batch_norm_2d_forward(..., training=True)'s statistics (running_mean and running_var
    updated in place with `momentum`), then y = act((x - mean) * invstd * weight + bias) in one pass. x NCHW or
    channels_last in memory, y in x's memory format; dtypes as batch_norm_2d_forward's.""",
    inputs=(Input("x"), Input("weight"), Input("bias"), *common.MUTATED_STATISTICS),
    scalars=(common.MOMENTUM, common.EPS, ACTIVATION),
    outputs=(
        Output("y", like="x"),
        Output("save_mean", like="running_mean", shape=forward._saved, sum=True, dtype=forward._acc),
        Output("save_invstd", like="running_mean", shape=forward._saved, sum=True, dtype=forward._acc),
    ),
    describe=common.training_mode(
        common.describe("batch_norm_2d_act_forward", "x", ("x",), ("weight", "bias", "running_mean", "running_var"))
    ),
    choose=_choose_forward,
    candidates=_candidates_forward,
    kernels=training.FORWARD_KERNELS,
    aligned=("x", "y"),
    orders=_orders,
    fits=training.fits,
    torch=True,
    gradient=Gradient(
        "batch_norm_2d_act_backward", grads={"dy": "y"}, gives={"dx": "x", "dweight": "weight", "dbias": "bias"}
    ),
)

BACKWARD = Op(
    name="batch_norm_2d_act_backward",
    doc="""(dx, dweight, dbias) of act(BatchNorm2d(x)) in training mode from dy (the gradient of y) and the forward's
    save_mean and save_invstd: the gradient through the activation at z = (x - mean) * invstd * weight + bias
    (recomputed from x), then through the batch statistics, as batch_norm_2d_backward(..., training=True). Sums in a
    fixed order: bit-identical run to run.""",
    inputs=(Input("dy"), Input("x"), Input("weight"), Input("bias"), *SAVED),
    scalars=(common.EPS, ACTIVATION),
    outputs=(
        Output("dx", like="x"),
        Output("dweight", like="weight", sum=True),
        Output("dbias", like="weight", sum=True),
    ),
    describe=common.training_mode(
        common.describe(
            "batch_norm_2d_act_backward", "x", ("x", "dy"), ("weight", "bias"), ("save_mean", "save_invstd")
        )
    ),
    choose=_choose_backward,
    candidates=_candidates_backward,
    kernels=training.BACKWARD_KERNELS,
    aligned=("dy", "x", "dx"),
    orders=_orders,
    fits=training.fits,
    torch=True,
)

OPS = (BACKWARD, FORWARD)
