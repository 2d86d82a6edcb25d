"""BatchNorm2d NCHW forward in inference mode (frozen running statistics): its launch plans and op declarations."""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from rust_kernels.errors import ArgumentError
from rust_kernels.families.batch_norm import common
from rust_kernels.kernels import (  # type: ignore[attr-defined]
    BatchNorm2dNchwForwardInference,
    BatchNorm2dNchwForwardInferenceFlat,
)
from rust_kernels.runtime import Gradient, Input, Op, Output, Placement, Plan, Problem

MAX_GRID_Y = 65535  # the seed kernel's batch is grid y
FLAT_BLOCK = 256
WAVES = 4  # the flat kernel's grid: at most this many waves of full SMs, each thread then strides on
KERNELS = (BatchNorm2dNchwForwardInference, BatchNorm2dNchwForwardInferenceFlat)


def seed(shape: common.Shape4, dtype: str, param: str, block_hw: int | None = None) -> Plan:
    """The original kernel, a CTA per (b, c) row: about four elements per thread, from 32 to 512 threads."""
    batches, channels, height, width = shape
    if batches > MAX_GRID_Y:
        raise ArgumentError(f"block_hw: runs the original kernel, whose grid y is the batch: B = {batches} exceeds "
                            f"{MAX_GRID_Y} (leave block_hw unset for the streaming kernel)")  # fmt: skip
    hw = height * width
    block = block_hw or min(512, max(32, 1 << max(0, math.ceil(hw / 4) - 1).bit_length()))
    return Plan(BatchNorm2dNchwForwardInference(block, dtype=dtype, param_dtype=param), (channels, batches, 1))


def flat(shape: common.Shape4, dtype: str, param: str, vectorized: int, sms: int, block: int = FLAT_BLOCK) -> Plan:
    """The streaming kernel with enough CTAs for every unit, at most WAVES waves of 2048-thread SMs."""
    units = math.prod(shape) // common.unit_elements(vectorized, dtype)
    ctas = max(1, min(-(-units // block), sms * (2048 // block) * WAVES))
    kernel = BatchNorm2dNchwForwardInferenceFlat(block, vectorized, dtype=dtype, param_dtype=param)
    return Plan(kernel, (ctas, 1, 1), (("CTAS", ctas),))


@cache  # a pure function of its arguments: the op asks it on every call it decides
def plan(shape: common.Shape4, dtype: str, param: str, alignment: int, sms: int, block_hw: int | None = None) -> Plan:
    """The streaming kernel in the widest pack that the rows and the pointers' `alignment` allow (the seed kernel's
    grid [C, B] leaves threads idle on small rows and loads one element at a time: measured on the H200 at
    0.23-0.69 of the memory bound, f32); `block_hw` runs the seed kernel with that CTA size instead."""
    if block_hw is not None:
        return seed(shape, dtype, param, block_hw)
    vectorized = common.vector_mode(shape[2] * shape[3], dtype, alignment)
    return flat(shape, dtype, param, vectorized, sms)


def choose(problem: Problem, placement: Placement) -> Plan:
    return plan(problem.shape, problem.dtype, problem.param, placement.alignment, placement.sms,  # type: ignore[arg-type]
                problem.scalars.get("block_hw"))  # fmt: skip


# --- the ops ----------------------------------------------------------------------------------------------------------
ARRAYS = (Input("x"), Input("weight"), Input("bias"), *common.STATISTICS)


def _empty(problem: Problem) -> tuple[int, ...]:
    return (0,)


def _op(name: str, **declared: Any) -> Op:
    """An op of these kernels and plans: the NCHW op and its torch-native signature differ in the rest alone."""
    describe = common.describe(name, "x", ("x",), ("weight", "bias", "running_mean", "running_var"))
    return Op(name=name, inputs=ARRAYS, describe=describe, choose=choose, kernels=KERNELS, aligned=("x", "y"),
              **declared)  # fmt: skip


NCHW = _op(
    name="batch_norm_2d_nchw_forward_inference",
    doc="""y = (x - running_mean) * rstd * weight + bias over NCHW `x`, per channel, with frozen statistics. The
    parameters and statistics share x's dtype, or are f32 with bf16/f16 x (torch.autocast's pairing); y has x's.
    The plan streams the tensor in packs; `block_hw` runs the original kernel with that CTA size instead. Launches
    go to `stream`, by default the current stream of the arrays' library.""",
    scalars=(common.EPS, common.BLOCK_HW),
    outputs=(Output("y", like="x"),),
)

NATIVE = _op(
    name="batch_norm_2d_forward",
    doc="""(y, save_mean, save_invstd), as torch.ops.aten.native_batch_norm for NCHW x. Eval mode (frozen running
    statistics): save_mean and save_invstd are empty, as PyTorch returns them in eval mode. training=True raises
    NotImplementedError until the training-mode kernels land.""",
    scalars=(common.TRAINING, common.MOMENTUM, common.EPS),
    outputs=(
        Output("y", like="x"),
        Output("save_mean", like="running_mean", shape=_empty),
        Output("save_invstd", like="running_mean", shape=_empty),
    ),
    torch=True,
    gradient=Gradient(
        "batch_norm_2d_backward", grads={"dy": "y"}, gives={"dx": "x", "dweight": "weight", "dbias": "bias"}
    ),
)

OPS = (NCHW, NATIVE)
