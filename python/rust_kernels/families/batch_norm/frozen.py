"""BatchNorm2d with frozen running statistics (eval mode) in channels_last: the launch plans of the eval forward and
backward over NHWC memory, so that a model kept in channels_last pays no layout change (the NCHW eval plans are in
forward.py and backward.py).

Forward: batch_norm_2d_frozen_forward_channels_last, one elementwise launch shaped as the training normalize's (each
thread on one column of channel units, its coefficients computed once): 2 passes. Where weight, bias and the running
statistics are aligned to x's packs, its _packed variant loads a thread's coefficients in packs too (PACKED). Backward:
batch_norm_2d_frozen_backward_channels_last, one launch shaped as the training backward's reduction (column blocks of
channel units, slices of rows merged in a fixed order), which also writes dx = dy * weight * invstd as it reads dy:
3 passes, where the training backward's two launches take 5.
"""

from __future__ import annotations

import math
from functools import cache

from rust_kernels.families.batch_norm import common, training
from rust_kernels.kernels import (  # type: ignore[attr-defined]
    BatchNorm2dFrozenBackwardChannelsLast,
    BatchNorm2dFrozenBackwardChannelsLastAct,
    BatchNorm2dFrozenForwardAct,
    BatchNorm2dFrozenForwardActPacked,
    BatchNorm2dFrozenForwardAddRelu,
    BatchNorm2dFrozenForwardAddReluPacked,
    BatchNorm2dFrozenForwardChannelsLast,
    BatchNorm2dFrozenForwardChannelsLastPacked,
)
from rust_kernels.runtime import Placement, Plan, Problem

FORWARD_KERNELS = (BatchNorm2dFrozenForwardChannelsLast, BatchNorm2dFrozenForwardChannelsLastPacked)
# The channels_last eval forwards that load a thread's coefficients (weight, bias, running statistics) in packs as
# wide as x's, by the kernel each stands in for where those arrays are aligned to them: bf16's 8 lanes take 8 16-byte
# loads, not 32 scalar ones. On an H100 (12-07, docs/results/h100-2026-12-07-cl-coefs/): 1.00-1.59x as fast.
PACKED = {
    BatchNorm2dFrozenForwardChannelsLast: BatchNorm2dFrozenForwardChannelsLastPacked,
    BatchNorm2dFrozenForwardAct: BatchNorm2dFrozenForwardActPacked,
    BatchNorm2dFrozenForwardAddRelu: BatchNorm2dFrozenForwardAddReluPacked,
}
PACK_BYTES = {1: 16, 2: 8}  # x's pack by mode, and so the alignment PACKED needs of the coefficients' arrays
BACKWARD_KERNELS = (BatchNorm2dFrozenBackwardChannelsLast,)
# The forward's grids giving each thread this many units, besides the training normalize's: a thread's coefficients
# (per lane four loads, a square root and a division) cost more than the training normalize's, so fewer threads,
# each streaming more units, can be faster (the autotuner decides).
UNITS_PER_THREAD = (4, 8, 16)
# The channels_last eval forwards' rule past one wave of threads: at least a thread's units in one step of its walk
# (each step loads 4 units before it stores any). The training normalize's grid gives one to four there, up to 4 waves
# of units: with its per-lane coefficients a thread then moves too little. Against that grid, over the shipped H200
# table's timings of suite keys (docs/results/h100-2026-12-07-cl-coefs/rule_from_table.txt), more than 3% faster on
# 90 of 475 keys of the eval forward (1.20x at their median, up to 1.67x; slower on 3, up to 1.12x), on 26 of 104 with
# ReLU fused and 21 of 99 with the residual add and ReLU (none slower); on an H100, 24 cases, 1.00-1.37x.
RULE_UNITS = 4


def forward_grid(shape: common.Shape4, dtype: str, vectorized: int, sms: int) -> int:
    """The channels_last eval forwards' rule grid: the training normalize's (a unit a thread where one wave of
    2048-thread SMs holds the tensor's units), but past one wave at least RULE_UNITS units a thread."""
    grid = training.elementwise_grid(shape, dtype, vectorized, True, sms)
    if math.prod(shape) // training.lanes(vectorized, dtype) > sms * 2048:
        return min(grid, thread_grid(shape, dtype, vectorized, RULE_UNITS))
    return grid


def packs_coefficients(dtype: str, vectorized: int, coefficients: int) -> bool:
    """Whether a channels_last eval forward in pack mode `vectorized` takes its PACKED kernel: x's packs hold more
    than one lane and the coefficients' arrays share an alignment (`coefficients`, 0: unknown) of a pack."""
    return vectorized in PACK_BYTES and training.lanes(vectorized, dtype) > 1 and coefficients >= PACK_BYTES[vectorized]


def elementwise(kind: type, shape: common.Shape4, dtype: str, param: str, vectorized: int, channels_last: bool,
                sms: int, ctas: int | None = None, activation: int = 0, coefficients: int = 0) -> Plan:  # fmt: skip
    """training.elementwise's launch of `kind`, of its PACKED kernel where it reads channels_last and the
    coefficients' alignment allows (packs_coefficients)."""
    if channels_last and packs_coefficients(dtype, vectorized, coefficients):
        kind = PACKED[kind]
    return training.elementwise(kind, shape, dtype, param, vectorized, channels_last, sms, ctas, activation)


def forward(shape: common.Shape4, dtype: str, param: str, vectorized: int, sms: int, ctas: int | None = None,
            coefficients: int = 0) -> Plan:  # fmt: skip
    """The forward's launch on `ctas` CTAs, by default forward_grid's; its coefficients in packs where their
    alignment allows."""
    ctas = ctas or forward_grid(shape, dtype, vectorized, sms)
    kind = BatchNorm2dFrozenForwardChannelsLast
    return elementwise(kind, shape, dtype, param, vectorized, True, sms, ctas, coefficients=coefficients)


def backward(shape: common.Shape4, dtype: str, param: str, vectorized: int, sms: int, split: int | None = None,
             activation: int = 0) -> Plan:  # fmt: skip
    """The backward's launch, with the training reduction's geometry (or `split` slices of the rows); through a
    fused `activation`'s gradient where it is not 0."""
    kind = BatchNorm2dFrozenBackwardChannelsLastAct if activation else BatchNorm2dFrozenBackwardChannelsLast
    return training.reduction(kind, shape, dtype, param, vectorized, True, sms, split, width=2, activation=activation)


@cache  # a pure function of its arguments: the ops ask it on every call they decide
def plan(which: str, shape: common.Shape4, dtype: str, param: str, alignment: int, sms: int, activation: int = 0,
         coefficients: int = 0) -> Plan:  # fmt: skip
    """The forward's or the backward's launch (`activation`: the backward through that fused activation's
    gradient; `coefficients`: the alignment the forward's per-channel arrays share)."""
    vectorized = training.vector_mode(shape, dtype, alignment, True)
    if which == "forward":
        return forward(shape, dtype, param, vectorized, sms, coefficients=coefficients)
    return backward(shape, dtype, param, vectorized, sms, activation=activation)


@cache
def _candidates(which: str, shape: common.Shape4, dtype: str, param: str, alignment: int, sms: int,
                activation: int = 0, coefficients: int = 0) -> tuple[Plan, ...]:  # fmt: skip
    vectorized = training.vector_mode(shape, dtype, alignment, True)
    out = [plan(which, shape, dtype, param, alignment, sms, activation, coefficients)]
    if which == "forward":
        out += [forward(shape, dtype, param, vectorized, sms, ctas, packs)
                for ctas in (*training.grids_around(shape, dtype, vectorized, True, sms),
                             *thread_grids(shape, dtype, vectorized))
                for packs in (coefficients, 0)]  # fmt: skip
    else:
        out += [backward(shape, dtype, param, vectorized, sms, split, activation)
                for split in training.splits_around(shape, dtype, vectorized, True, sms)]  # fmt: skip
    return tuple(dict.fromkeys(out))


def thread_grid(shape: common.Shape4, dtype: str, vectorized: int, per_thread: int, channels_last: bool = True) -> int:
    """The forward's grid giving each thread `per_thread` units, for channels_last a multiple of what keeps a thread
    on one column of channel units."""
    units = math.prod(shape) // training.lanes(vectorized, dtype)
    step = training.column_step(shape, dtype, vectorized) if channels_last else 1
    ctas = -(-units // (training.ELEMENTWISE_BLOCK * per_thread))
    return max(step, -(-ctas // step) * step)


def thread_grids(shape: common.Shape4, dtype: str, vectorized: int, channels_last: bool = True) -> list[int]:
    """The forward's grids giving each thread UNITS_PER_THREAD units (thread_grid)."""
    return list(dict.fromkeys(thread_grid(shape, dtype, vectorized, n, channels_last) for n in UNITS_PER_THREAD))


def choose(which: str, problem: Problem, placement: Placement) -> Plan:
    return plan(which, problem.shape, problem.dtype, problem.param, placement.alignment, placement.sms,  # type: ignore[arg-type]
                coefficients=placement.coefficients)  # fmt: skip


def candidates(which: str, problem: Problem, placement: Placement) -> tuple[Plan, ...]:
    """What the autotuner times: the rule's plan, and the forward's grid at half, once and twice the rule's and
    those of thread_grids (each with and without its coefficients in packs, where they may be), or the backward's
    split from a quarter to four times the rule's (training.grids_around, splits_around)."""
    return _candidates(which, problem.shape, problem.dtype, problem.param, placement.alignment, placement.sms,  # type: ignore[arg-type]
                       coefficients=placement.coefficients)  # fmt: skip
