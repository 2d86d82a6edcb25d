"""BatchNorm2d NCHW backward with frozen running statistics (eval mode): its launch plans and its op declarations.

Plans. The kernels move 3 x numel x sizeof(D) bytes, so they are memory-bound: a plan's job is to keep every SM
streaming. One CTA per channel leaves SMs idle when C is small, so each channel is then split over several CTAs
(batch_norm_2d_nchw_backward_split), as long as each keeps enough work; 16- or 8-byte vector accesses are used when
H*W and the pointers allow; channels too small for a CTA (a few thousand single elements) get a warp each
(batch_norm_2d_nchw_backward_warp). Rows that no 16-byte pack divides (7x7, 14x14 in 16-bit) may also be read over
groups of adjacent channels, whose rows lie together in each image, as 16-byte packs
(batch_norm_2d_frozen_backward_grouped: one pass writing dx as it sums): an autotuner candidate, and the rule's on
large 16-bit tensors; through a fused activation (batch_norm_2d_frozen_backward_grouped_act) on many channels. The
seed kernel (batch_norm_2d_nchw_backward, one CTA per channel) keeps the original signature.
"""

from __future__ import annotations

import math
from functools import cache

from rust_kernels.dtypes import DTYPES
from rust_kernels.families.batch_norm import common, frozen, training
from rust_kernels.kernels import (  # type: ignore[attr-defined]
    BatchNorm2dFrozenBackwardGrouped,
    BatchNorm2dFrozenBackwardGroupedAct,
    BatchNorm2dNchwBackward,
    BatchNorm2dNchwBackwardSplit,
    BatchNorm2dNchwBackwardSplitAct,
    BatchNorm2dNchwBackwardWarp,
)
from rust_kernels.runtime import Input, Op, Output, Placement, Plan, Problem, Workspace

MAX_SPLIT = 64
# Channels of at most this many single elements (no packs possible) go to the warp-per-channel kernel. Measured on
# the H200: (32,2048,7,7) f32 20.7 -> 19.0 us, bf16 14.8 -> 14.4 us; with packs, or more elements per channel, a
# CTA per channel is faster.
WARP_MAX_UNITS = 2048
# A CTA that gets less than this many units (elements or packs) spends more on its fixed costs (statistics,
# reductions) than on streaming: 2 unrolled steps of a 128-thread CTA.
MIN_UNITS_PER_CTA = 1024
SPLIT_BLOCKS = (128, 256, 512)  # the split and warp kernels' CTA sizes (their specs' range)
# H*W = 1 from this size of x on: the channels_last kernel, whose rows of C are read coalesced where the warp kernel
# reads a channel's values C apart (H100: 1024x2048 f32 46.7 -> 18.4 us; below, 0.9-1.1x either way).
NHWC_MIN_BYTES = 128 << 10
# Through a fused activation's gradient from this size on: the warp kernel has no such form, and the split kernel
# loses sooner (H100, ReLU, bf16 8x4096: 12.6 -> 8.4 us; at 32 KiB the NCHW plan is 1.3x faster).
NHWC_ACT_MIN_BYTES = 64 << 10
# 16-bit x from this size on, where the grouped kernel fits and no 16-byte pack divides H*W, takes it (H100, 12-07:
# 1.13-1.24x faster than the split kernel at 8-12 MiB of bf16 7x7 and 14x14 rows; 0.63-0.92x on 1.6-6 MiB, and in f32
# 0.92-1.04x; docs/results/h100-2026-12-07-eval-groups/), split to at most 2 CTAs an SM (more lost 8% at 128x480x14x14).
GROUPED_RULE_BYTES = 8 << 20
# Through a fused activation's gradient (the split kernel's the only other form: the warp kernel has none) the rule
# takes the grouped kernel where it fits from this many channels an SM on: many channels of little work each, where a
# CTA per channel spends most of its time on its fixed costs (H100, 12-07, ReLU: 1.00-2.9x as fast at C = 672 to 2048,
# 7x7 and 14x14, batch 1 to 128, bf16 and f32; its best plan 0.72-1.21x at C = 96 to 512;
# docs/results/h100-2026-12-07-act-groups/).
GROUPED_ACT_CHANNELS_PER_SM = 4
KERNELS = (
    BatchNorm2dNchwBackward,
    BatchNorm2dNchwBackwardSplit,
    BatchNorm2dNchwBackwardWarp,
    BatchNorm2dFrozenBackwardGrouped,
)


def split(channels: int, block_hw: int, vectorized: int, deterministic: int, dtype: str, param: str, slices: int,
          activation: int = 0) -> Plan:  # fmt: skip
    """The split kernel, each channel over `slices` CTAs, with its workspaces: partials in the accumulation type
    ([C][SPLIT][2] when deterministic, else [C][2]) and a counter per channel; through a fused `activation`'s
    gradient (batch_norm_2d_nchw_backward_split_act, deterministic only) where it is not 0."""
    if activation:
        kernel = BatchNorm2dNchwBackwardSplitAct(block_hw, vectorized, 1, activation, dtype=dtype, param_dtype=param)
    else:
        kernel = BatchNorm2dNchwBackwardSplit(block_hw, vectorized, deterministic, dtype=dtype, param_dtype=param)
    partials = Workspace("workspace", kernel.dtype_info.acc, channels * (slices if kernel.deterministic else 1) * 2)
    return Plan(kernel, (channels, slices, 1), (("SPLIT", slices),), (partials, Workspace("counters", "u32", channels)))


def warp(channels: int, block_hw: int, vectorized: int, dtype: str, param: str, ctas: int | None = None) -> Plan:
    """The warp-per-channel kernel, with a warp for every channel (or `ctas` CTAs whose warps stride over them)."""
    ctas = ctas or max(1, -(-channels // (block_hw // 32)))
    kernel = BatchNorm2dNchwBackwardWarp(block_hw, vectorized, dtype=dtype, param_dtype=param)
    return Plan(kernel, (ctas, 1, 1), (("CTAS", ctas),))


def grouped(shape: common.Shape4, dtype: str, param: str, sms: int, split: int | None = None, cols: int | None = None,
            activation: int = 0) -> Plan:  # fmt: skip
    """The grouped kernel: `cols` channels a CTA (training.group_width's, the widest, by default), `split` slices
    of the images (grouped_split's by default), with its workspaces: partials [SPLIT][C][2] and a counter per group;
    through a fused `activation`'s gradient (batch_norm_2d_frozen_backward_grouped_act) where it is not 0."""
    cols = cols or training.group_width(shape, dtype) or 1
    grid_x = -(-shape[1] // cols)
    split = split or grouped_split(shape, cols, sms)
    block = training.REDUCTION_BLOCK
    if activation:
        kernel = BatchNorm2dFrozenBackwardGroupedAct(block, activation, dtype=dtype, param_dtype=param)
    else:
        kernel = BatchNorm2dFrozenBackwardGrouped(block, dtype=dtype, param_dtype=param)
    spaces = (Workspace("workspace", kernel.dtype_info.acc, shape[1] * split * 2), Workspace("counters", "u32", grid_x))
    return Plan(kernel, (grid_x, split, 1), (("SPLIT", split), ("COLS", cols)), spaces)


def grouped_split(shape: common.Shape4, cols: int, sms: int) -> int:
    """The grouped kernel's slices of the images by default: the most (a power of two, at most B) that keep its grid
    within 2 CTAs an SM. On an H100 (12-07, 59 cases with and without an activation) this was within 3% of the best
    grouped plan timed on 53, and faster than the training reductions' split capped to 2 CTAs an SM (the default
    before) by more than 1% on 21, slower on 2."""
    grid_x, split = -(-shape[1] // cols), 1
    while split * 2 <= shape[0] and grid_x * split * 2 <= 2 * sms:
        split *= 2
    return split


def grouped_fits(shape: common.Shape4, dtype: str, alignment: int) -> bool:
    """Whether the grouped kernel can run this shape and reads it in wider packs than the others: no 16-byte pack
    divides H*W, the arrays are 16-byte aligned and a group of 2+ channels fits (training.groups_fit)."""
    packs = common.vector_mode(shape[2] * shape[3], dtype, alignment) == 1
    return not packs and training.groups_fit(shape, dtype, alignment, False)


def group_widths(shape: common.Shape4, dtype: str) -> list[int]:
    """The grouped kernel's widths the autotuner times: training.group_width's and half of it where its rows are
    still whole packs (more of a CTA's threads busy where the widest leaves some without a pack column)."""
    widest = training.group_width(shape, dtype) or 1
    half, packed = widest // 2, common.unit_elements(training.GROUPS, dtype)
    return [widest] + ([half] if half >= 2 and half * shape[2] * shape[3] % packed == 0 else [])


def grouped_rule(shape: common.Shape4, dtype: str, alignment: int, sms: int, activation: int = 0) -> bool:
    """Whether the rule takes the grouped kernel where it fits: 16-bit x of GROUPED_RULE_BYTES or more; through an
    activation's gradient from GROUPED_ACT_CHANNELS_PER_SM channels an SM on."""
    if not grouped_fits(shape, dtype, alignment):
        return False
    if activation:
        return shape[1] >= GROUPED_ACT_CHANNELS_PER_SM * sms
    size = DTYPES[dtype].size
    return size == 2 and math.prod(shape) * size >= GROUPED_RULE_BYTES


def seed(channels: int, block_hw: int, dtype: str) -> Plan:
    """The original kernel: one CTA per channel."""
    return Plan(BatchNorm2dNchwBackward(block_hw=block_hw, dtype=dtype), (channels, 1, 1))


@cache  # a pure function of its arguments: the op asks it on every call it decides
def plan(shape: common.Shape4, dtype: str, param: str, alignment: int, sms: int, deterministic: bool = True,
         block_hw: int | None = None, activation: int = 0) -> Plan:  # fmt: skip
    """The plan for an NCHW shape; `alignment`: a power of two (at most 16) dividing the addresses of dy, x, dx;
    `activation`: through that fused activation's gradient (the split kernel, or at H*W = 1 the channels_last
    one). Where no 16-byte pack divides the rows, large 16-bit tensors, or through an activation many channels, take
    the grouped kernel (grouped_rule)."""
    if block_hw is None and common.nhwc_rule(shape, dtype, NHWC_ACT_MIN_BYTES if activation else NHWC_MIN_BYTES):
        return frozen.plan("backward", shape, dtype, param, alignment, sms, activation)
    if block_hw is None and grouped_rule(shape, dtype, alignment, sms, activation):
        return grouped(shape, dtype, param, sms, activation=activation)
    batches, channels, height, width = shape
    hw = height * width
    vectorized = common.vector_mode(hw, dtype, alignment)
    units = batches * hw // common.unit_elements(vectorized, dtype)
    if vectorized == 0 and units <= WARP_MAX_UNITS and not activation:
        return warp(channels, block_hw or 128, 0, dtype, param)
    # Measured on the H200 (bench and a sweep of block x split per shape): with C of 1.5 CTAs per SM or more, one
    # CTA per channel is best; fewer channels are split until there are about 2 CTAs per SM, as long as each CTA
    # keeps enough work. Bigger CTAs pay off only when each has a lot to stream.
    slices = 1
    if channels < sms * 3 // 2:
        while slices < MAX_SPLIT and channels * slices < 2 * sms and units // (2 * slices) >= MIN_UNITS_PER_CTA:
            slices *= 2
    per_cta = units // slices
    block = block_hw or (512 if per_cta >= 16384 else 256 if per_cta >= 4096 else 128)
    return split(channels, block, vectorized, int(deterministic), dtype, param, slices, activation)


def choose(problem: Problem, placement: Placement) -> Plan:
    scalars = problem.scalars
    return plan(problem.shape, problem.dtype, problem.param, placement.alignment, placement.sms,  # type: ignore[arg-type]
                scalars["deterministic"], scalars.get("block_hw"))  # fmt: skip


@cache
def _candidates(shape: common.Shape4, dtype: str, param: str, alignment: int, sms: int, deterministic: bool,
                activation: int = 0) -> tuple[Plan, ...]:  # fmt: skip
    batches, channels, height, width = shape
    vectorized = common.vector_mode(height * width, dtype, alignment)
    units = batches * height * width // common.unit_elements(vectorized, dtype)
    out = [plan(shape, dtype, param, alignment, sms, deterministic, activation=activation)]
    for block in SPLIT_BLOCKS:
        out.append(split(channels, block, vectorized, int(deterministic), dtype, param, 1, activation))
        slices = 2
        while slices <= MAX_SPLIT and channels * slices <= 4 * sms and units // slices >= block:
            out.append(split(channels, block, vectorized, int(deterministic), dtype, param, slices, activation))
            slices *= 2
        if vectorized == 0 and units <= 4 * WARP_MAX_UNITS and not activation:
            out.append(warp(channels, block, 0, dtype, param))
    if grouped_fits(shape, dtype, alignment):
        out += [grouped(shape, dtype, param, sms, s, cols, activation) for cols in group_widths(shape, dtype)
                for s in (grouped_split(shape, cols, sms), *training.splits_around(shape, dtype, training.GROUPS,
                                                                                   False, sms))
                if s <= batches]  # fmt: skip
    if common.both_layouts(shape):
        out += frozen._candidates("backward", shape, dtype, param, alignment, sms, activation)
    return tuple(dict.fromkeys(out))


def candidates(problem: Problem, placement: Placement) -> tuple[Plan, ...]:
    """What the autotuner times: the rule's plan; the split kernel at each CTA size, unsplit and split in powers of
    two while the grid stays within 4 CTAs per SM and every thread has a unit; the warp kernel where no packs fit;
    the grouped kernel where it fits and no 16-byte pack divides H*W, at its default split (grouped_split) and the
    training reductions' splits; where H*W = 1, the channels_last kernel's candidates too (frozen.candidates). None
    where the caller fixed the CTA size (block_hw)."""
    if problem.scalars.get("block_hw") is not None:
        return ()
    return _candidates(problem.shape, problem.dtype, problem.param, placement.alignment, placement.sms,  # type: ignore[arg-type]
                       problem.scalars["deterministic"])  # fmt: skip


# --- the ops ----------------------------------------------------------------------------------------------------------
ARRAYS = (Input("dy"), Input("x"), Input("weight"), *common.STATISTICS)
OUTPUTS = (Output("dx", like="x"), Output("dweight", like="weight", sum=True),
           Output("dbias", like="weight", sum=True))  # fmt: skip
PER_CHANNEL = ("weight", "running_mean", "running_var")


def _choose_native(problem: Problem, placement: Placement) -> Plan:
    if problem.scalars["training"]:
        return training.choose("backward", problem, placement)
    if problem.order is not None:
        return frozen.choose("backward", problem, placement)
    return choose(problem, placement)


def _candidates_native(problem: Problem, placement: Placement) -> tuple[Plan, ...]:
    if problem.scalars["training"]:
        return training.candidates("backward", problem, placement)
    if problem.order is not None:
        return frozen.candidates("backward", problem, placement)
    return candidates(problem, placement)


NCHW = Op(
    name="batch_norm_2d_nchw_backward",
    doc="""(dx, dweight, dbias) of BatchNorm2d over NCHW `x` with frozen running statistics. dy and x share a dtype;
    weight and the statistics have it too, or f32 with bf16/f16 activations (torch.autocast's pairing), and dweight
    and dbias come in the parameters' dtype. f32 accumulation for f32, bf16 and f16.

    The launch plan is chosen per shape (`block_hw` fixes its CTA size). The CTAs sharing a channel combine their
    partial sums in a fixed order, so results are bit-identical run to run; `deterministic=False` combines them with
    float atomics instead. `plan` overrides the choice. Empty inputs give empty dx and zero dweight, dbias.
    Launches go to `stream`, by default the current stream of the arrays' library.""",
    inputs=ARRAYS,
    scalars=(common.EPS, common.BLOCK_HW, common.DETERMINISTIC),
    outputs=OUTPUTS,
    describe=common.describe("batch_norm_2d_nchw_backward", "x", ("x", "dy"), PER_CHANNEL),
    choose=choose,
    kernels=KERNELS + frozen.BACKWARD_KERNELS,
    aligned=("dy", "x", "dx"),
    candidates=candidates,
)

NATIVE = Op(
    name="batch_norm_2d_backward",
    doc="""(dx, dweight, dbias), as torch.ops.aten.native_batch_norm_backward with output_mask all True.
    training=True: the gradient through the batch statistics, from the forward's save_mean and save_invstd (dy, x
    NCHW or channels_last in memory, dx in x's memory format; sums added in a fixed order, bit-identical run to
    run; `deterministic` is accepted for the signature). Eval mode: frozen running statistics, NCHW or
    channels_last (channels_last in one pass, its sums in a fixed order; save_mean and save_invstd, empty in eval
    mode, are not read).""",
    inputs=(*ARRAYS, Input("save_mean", optional=True), Input("save_invstd", optional=True)),
    scalars=(common.TRAINING, common.EPS, common.DETERMINISTIC),
    outputs=OUTPUTS,
    describe=common.describe(
        "batch_norm_2d_backward", "x", ("x", "dy"), PER_CHANNEL, ("save_mean", "save_invstd"), eval_channels_last=True
    ),
    choose=_choose_native,
    candidates=_candidates_native,
    kernels=KERNELS + training.BACKWARD_KERNELS + frozen.BACKWARD_KERNELS,
    aligned=("dy", "x", "dx"),
    orders=common.native_orders,
    fits=training.fits,
    torch=True,
)

OPS = (NCHW, NATIVE)
