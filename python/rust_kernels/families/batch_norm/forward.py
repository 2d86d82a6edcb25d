"""BatchNorm2d forward: the NCHW inference-mode (frozen running statistics) launch plans, and the op declarations,
whose torch-native op also runs training mode (training.py's plans)."""

from __future__ import annotations

import math
from functools import cache

from rust_kernels.dtypes import DTYPES
from rust_kernels.errors import ArgumentError
from rust_kernels.families.batch_norm import common, frozen, training
from rust_kernels.kernels import (  # type: ignore[attr-defined]
    BatchNorm2dFrozenForward,
    BatchNorm2dNchwForwardInference,
    BatchNorm2dNchwForwardInferenceFlat,
    BatchNorm2dNchwForwardInferenceTiled,
)
from rust_kernels.runtime import Gradient, Input, Op, Output, Placement, Plan, Problem

MAX_GRID_Y = 65535  # the seed kernel's batch is grid y
FLAT_BLOCK = 256
FLAT_BLOCKS = (128, 256, 512)  # the streaming kernel's CTA sizes (its spec's range)
WAVES = 4  # the flat kernel's grid: at most this many waves of full SMs, each thread then strides on
KERNELS = (
    BatchNorm2dNchwForwardInference,
    BatchNorm2dNchwForwardInferenceFlat,
    BatchNorm2dNchwForwardInferenceTiled,
    BatchNorm2dFrozenForward,
)
TILED_BLOCKS = (128, 256)  # the tiled kernel's CTA sizes (its spec's range)
TILE = 4  # units per thread of a tile (the tiled kernel's template)
# H*W = 1 from this size of x on: the channels_last kernel, which loads packs of a row of C where the streaming one
# loads single elements, each thread on NHWC_UNITS of them (H100: 1024x4096 bf16 21.1 -> 11.9 us; below, it is
# up to 1 us slower).
NHWC_MIN_BYTES = 2 << 20
NHWC_UNITS = 8
# Rows that no pack divides (7x7, 17x17, 35x35), from this size of x on: the packed frozen forward (16-byte packs over
# the flat tensor), where the streaming kernel moves one element at a time. Measured on an H100 against every other
# candidate (docs/results/h100-2026-12-06-eval-packs/): at 1.7-99 MB of x 1.39-2.55x faster than the streaming kernel
# in bf16 and 1.18-1.47x in f32 (0.85-0.97 of the bound; 0.87-1.12x torch.compile's speed, the streaming kernel's
# 0.40-0.74x); at batch 1 (100-111 KB) 4-7% slower, a launch's latency either way.
PACKED_MIN_BYTES = 1 << 20


def seed(shape: common.Shape4, dtype: str, param: str, block_hw: int | None = None) -> Plan:
    """The original kernel, a CTA per (b, c) row: about four elements per thread, from 32 to 512 threads."""
    batches, channels, height, width = shape
    if batches > MAX_GRID_Y:
        raise ArgumentError(f"block_hw: runs the original kernel, whose grid y is the batch: B = {batches} exceeds "
                            f"{MAX_GRID_Y} (leave block_hw unset for the streaming kernel)")  # fmt: skip
    hw = height * width
    block = block_hw or min(512, max(32, 1 << max(0, math.ceil(hw / 4) - 1).bit_length()))
    return Plan(BatchNorm2dNchwForwardInference(block, dtype=dtype, param_dtype=param), (channels, batches, 1))


def flat(shape: common.Shape4, dtype: str, param: str, vectorized: int, sms: int, block: int = FLAT_BLOCK,
         waves: int = WAVES) -> Plan:  # fmt: skip
    """The streaming kernel with enough CTAs for every unit, at most `waves` waves of 2048-thread SMs."""
    units = math.prod(shape) // common.unit_elements(vectorized, dtype)
    ctas = max(1, min(-(-units // block), sms * (2048 // block) * waves))
    kernel = BatchNorm2dNchwForwardInferenceFlat(block, vectorized, dtype=dtype, param_dtype=param)
    return Plan(kernel, (ctas, 1, 1), (("CTAS", ctas),))


def packed(shape: common.Shape4, dtype: str, param: str, sms: int, ctas: int | None = None) -> Plan:
    """The frozen forward over 16-byte packs of the flat NCHW tensor, for rows that no pack divides (where the
    streaming kernel moves one element at a time and computes each element's coefficients: 0.48-0.51 of the bound at
    7x7 in bf16 on an H100), on the training normalize's grid (within 2% of the best grid timed) or `ctas` CTAs."""
    return training.elementwise(BatchNorm2dFrozenForward, shape, dtype, param, training.FLAT, False, sms, ctas)


def unpacked_rows(shape: common.Shape4, dtype: str, alignment: int) -> bool:
    """Whether no pack divides the rows and the packed frozen forward runs the tensor (training.FLAT)."""
    return training.elementwise_mode(shape, dtype, alignment, False) == training.FLAT


def tiled(shape: common.Shape4, dtype: str, param: str, vectorized: int, block: int) -> Plan:
    """The tiled kernel: a CTA per TILE * block consecutive units, with its rows' coefficients in shared memory."""
    units = math.prod(shape) // common.unit_elements(vectorized, dtype)
    kernel = BatchNorm2dNchwForwardInferenceTiled(block, vectorized, dtype=dtype, param_dtype=param)
    return Plan(kernel, (max(1, -(-units // (TILE * block))), 1, 1))


@cache  # a pure function of its arguments: the op asks it on every call it decides
def plan(shape: common.Shape4, dtype: str, param: str, alignment: int, sms: int, block_hw: int | None = None,
         coefficients: int = 0) -> Plan:  # fmt: skip
    """The streaming kernel in the widest pack that the rows and the pointers' `alignment` allow (the seed kernel's
    grid [C, B] leaves threads idle on small rows and loads one element at a time: measured on the H200 at
    0.23-0.69 of the memory bound, f32), at H*W = 1 from NHWC_MIN_BYTES on the channels_last kernel (NHWC_UNITS a
    thread; its coefficients in packs where their alignment, `coefficients`, allows), where no pack divides the
    rows from PACKED_MIN_BYTES on the packed frozen forward; `block_hw` runs the seed kernel with that CTA size
    instead."""
    if block_hw is not None:
        return seed(shape, dtype, param, block_hw)
    if nhwc := nhwc_launch(shape, dtype, alignment):
        packs, ctas = nhwc
        return frozen.forward(shape, dtype, param, packs, sms, ctas, coefficients)
    if unpacked_rows(shape, dtype, alignment) and math.prod(shape) * DTYPES[dtype].size >= PACKED_MIN_BYTES:
        return packed(shape, dtype, param, sms)
    vectorized = common.vector_mode(shape[2] * shape[3], dtype, alignment)
    return flat(shape, dtype, param, vectorized, sms)


def nhwc_launch(shape: common.Shape4, dtype: str, alignment: int) -> tuple[int, int] | None:
    """(pack mode, CTAs) of the channels_last eval forward kernels where an NCHW call's rule runs them (H*W = 1,
    from NHWC_MIN_BYTES of x on: this op's and the fused eval forwards'). Not the training normalize's grid, about a
    unit a thread: a thread computes its column's coefficients before it loads x, so it must stream enough to cover
    them (NHWC_UNITS)."""
    if not common.nhwc_rule(shape, dtype, NHWC_MIN_BYTES):
        return None
    packs = training.elementwise_mode(shape, dtype, alignment, True)
    return packs, frozen.thread_grid(shape, dtype, packs, NHWC_UNITS)


def choose(problem: Problem, placement: Placement) -> Plan:
    return plan(problem.shape, problem.dtype, problem.param, placement.alignment, placement.sms,  # type: ignore[arg-type]
                problem.scalars.get("block_hw"), placement.coefficients)  # fmt: skip


@cache
def _candidates(shape: common.Shape4, dtype: str, param: str, alignment: int, sms: int, coefficients: int = 0
                ) -> tuple[Plan, ...]:  # fmt: skip
    vectorized = common.vector_mode(shape[2] * shape[3], dtype, alignment)
    out = [plan(shape, dtype, param, alignment, sms, coefficients=coefficients)]
    out += [flat(shape, dtype, param, vectorized, sms, block, waves) for block in FLAT_BLOCKS for waves in (1, 2, 4, 8)]
    out += [tiled(shape, dtype, param, vectorized, block) for block in TILED_BLOCKS]
    if shape[0] <= MAX_GRID_Y:
        out.append(seed(shape, dtype, param))
    if unpacked_rows(shape, dtype, alignment):
        grids = (*training.grids_around(shape, dtype, training.FLAT, False, sms),
                 *frozen.thread_grids(shape, dtype, training.FLAT, channels_last=False))  # fmt: skip
        out += [packed(shape, dtype, param, sms, ctas) for ctas in grids]
    if common.both_layouts(shape):
        out += frozen._candidates("forward", shape, dtype, param, alignment, sms, coefficients=coefficients)
    return tuple(dict.fromkeys(out))


def candidates(problem: Problem, placement: Placement) -> tuple[Plan, ...]:
    """What the autotuner times: the rule's plan, the streaming kernel at each CTA size with 1 to 8 waves of CTAs,
    the tiled kernel (coefficients per tile, for small rows), the original kernel (a CTA per row), where no pack
    divides the rows the packed frozen forward at the grids of the fused eval forwards' candidates and, where
    H*W = 1, the channels_last kernel's candidates (frozen.candidates). None where the caller fixed the CTA size
    (block_hw)."""
    if problem.scalars.get("block_hw") is not None:
        return ()
    return _candidates(problem.shape, problem.dtype, problem.param, placement.alignment, placement.sms,  # type: ignore[arg-type]
                       placement.coefficients)  # fmt: skip


# --- the ops ----------------------------------------------------------------------------------------------------------
ARRAYS = (Input("x"), Input("weight"), Input("bias"), *common.STATISTICS)


def _saved(problem: Problem) -> tuple[int, ...]:
    """save_mean and save_invstd: [C] in training mode, empty in eval mode (as PyTorch returns them)."""
    return (problem.shape[1],) if problem.scalars.get("training") else (0,)


def _acc(problem: Problem) -> str:
    return DTYPES[problem.dtype].acc


def _choose_native(problem: Problem, placement: Placement) -> Plan:
    if problem.scalars["training"]:
        return training.choose("forward", problem, placement)
    if problem.order is not None:
        return frozen.choose("forward", problem, placement)
    return choose(problem, placement)


def _candidates_native(problem: Problem, placement: Placement) -> tuple[Plan, ...]:
    if problem.scalars["training"]:
        return training.candidates("forward", problem, placement)
    if problem.order is not None:
        return frozen.candidates("forward", problem, placement)
    return candidates(problem, placement)


NCHW = Op(
    name="batch_norm_2d_nchw_forward_inference",
    doc="""y = (x - running_mean) * rstd * weight + bias over NCHW `x`, per channel, with frozen statistics. The
    parameters and statistics share x's dtype, or are f32 with bf16/f16 x (torch.autocast's pairing); y has x's.
    The plan streams the tensor in packs; `block_hw` runs the original kernel with that CTA size instead. Launches
    go to `stream`, by default the current stream of the arrays' library.""",
    inputs=ARRAYS,
    scalars=(common.EPS, common.BLOCK_HW),
    outputs=(Output("y", like="x"),),
    describe=common.describe("batch_norm_2d_nchw_forward_inference", "x", ("x",), common.PARAMETERS),
    choose=choose,
    kernels=KERNELS + frozen.FORWARD_KERNELS,
    aligned=("x", "y"),
    coefficients=common.PARAMETERS,
    candidates=candidates,
)

NATIVE = Op(
    name="batch_norm_2d_forward",
    doc="""(y, save_mean, save_invstd), as torch.ops.aten.native_batch_norm for x of shape [B, C, H, W].

    training=True normalises with the batch statistics: save_mean and save_invstd = 1 / sqrt(biased variance + eps)
    per channel, in the accumulation type (f32 for bf16/f16 x, as PyTorch saves them), and running_mean and
    running_var updated in place with `momentum` (the unbiased variance for running_var); x NCHW or channels_last
    in memory, y in x's memory format. Statistics by Welford's method merged pairwise (stable whatever the mean),
    in a fixed order (bit-identical run to run). Eval mode (training=False) uses the frozen running statistics, x
    NCHW or channels_last (y in x's memory format): save_mean and save_invstd are empty, as PyTorch returns them in
    eval mode.""",
    inputs=(Input("x"), Input("weight"), Input("bias"), *common.MUTATED_STATISTICS),
    scalars=(common.TRAINING, common.MOMENTUM, common.EPS),
    outputs=(
        Output("y", like="x"),
        Output("save_mean", like="running_mean", shape=_saved, sum=True, dtype=_acc),
        Output("save_invstd", like="running_mean", shape=_saved, sum=True, dtype=_acc),
    ),
    describe=common.describe("batch_norm_2d_forward", "x", ("x",), common.PARAMETERS, eval_channels_last=True),
    choose=_choose_native,
    candidates=_candidates_native,
    kernels=KERNELS + training.FORWARD_KERNELS + frozen.FORWARD_KERNELS,
    aligned=("x", "y"),
    coefficients=common.PARAMETERS,
    orders=common.native_orders,
    fits=training.fits,
    torch=True,
    gradient=Gradient(
        "batch_norm_2d_backward", grads={"dy": "y"}, gives={"dx": "x", "dweight": "weight", "dbias": "bias"}
    ),
)

OPS = (NCHW, NATIVE)
