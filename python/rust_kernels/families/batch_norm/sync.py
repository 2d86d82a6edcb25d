"""SyncBatchNorm's per-rank ops: training-mode BatchNorm2d cut where the ranks must meet (rust_kernels.torch's
SyncBatchNorm runs its collectives between them), over the training kernels, NCHW or channels_last. Each takes one
rank's part of the batch, which may hold a single value per channel, or none (then nothing is launched: zero
statistics and sums, empty y and dx).

Forward: batch_norm_2d_moments (each channel's mean and M2) -> the ranks gather and merge (count, mean, M2) ->
batch_norm_2d_normalize (y with the merged mean and invstd). Backward: batch_norm_2d_backward_sums (this rank's
dweight and dbias, and the per-channel sums) -> the ranks add the sums, divided by the global count ->
batch_norm_2d_backward_dx (dx).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import cache
from typing import Any

from rust_kernels import arrays
from rust_kernels.errors import ArgumentError
from rust_kernels.families.batch_norm import common, training
from rust_kernels.kernels import (  # type: ignore[attr-defined]
    BatchNorm2dBackwardElementwise,
    BatchNorm2dBackwardReduce,
    BatchNorm2dMoments,
    BatchNorm2dNormalize,
)
from rust_kernels.runtime import Input, Op, Output, Placement, Plan, Problem

Describe = Callable[[dict[str, Any], dict[str, Any], str], Problem]
ELEMENTWISE = (BatchNorm2dNormalize, BatchNorm2dBackwardElementwise)
SAVED = ("save_mean", "save_invstd")  # the statistics a rank normalises with: the merged ones


@cache  # a pure function of its arguments: the ops ask it on every call they decide
def plan(kind: type, shape: common.Shape4, dtype: str, param: str, alignment: int, sms: int, channels_last: bool,
         grid: int | None = None) -> Plan:  # fmt: skip
    """The launch of `kind` (a reduction: the statistics or the backward's sums; else an elementwise pass) that the
    training plans would make, in the widest pack the arrays allow; `grid`: the reduction's split or the
    elementwise launch's CTAs instead of the rule's."""
    if kind in ELEMENTWISE:
        packs = training.elementwise_mode(shape, dtype, alignment, channels_last)
        return training.elementwise(kind, shape, dtype, param, packs, channels_last, sms, grid)
    vectorized = training.vector_mode(shape, dtype, alignment, channels_last)
    width = 2 if kind is BatchNorm2dBackwardReduce else 3
    return training.reduction(kind, shape, dtype, param, vectorized, channels_last, sms, grid, width)


@cache
def _candidates(kind: type, shape: common.Shape4, dtype: str, param: str, alignment: int, sms: int,
                channels_last: bool) -> tuple[Plan, ...]:  # fmt: skip
    elementwise = kind in ELEMENTWISE
    mode = (training.elementwise_mode if elementwise else training.vector_mode)(shape, dtype, alignment, channels_last)
    around = training.grids_around if elementwise else training.splits_around
    own = plan(kind, shape, dtype, param, alignment, sms, channels_last)
    grids = around(shape, dtype, mode, channels_last, sms)
    return tuple(
        dict.fromkeys([own, *(plan(kind, shape, dtype, param, alignment, sms, channels_last, g) for g in grids)])
    )


def _plans(kind: type) -> tuple[Callable[[Problem, Placement], Plan], Callable[[Problem, Placement], Any]]:
    """The op's rule, and its candidates for the autotuner (the training plans' splits or grids around the rule's)."""

    def choose(problem: Problem, placement: Placement) -> Plan:
        return plan(kind, problem.shape, problem.dtype, problem.param, placement.alignment, placement.sms,  # type: ignore[arg-type]
                    problem.order is not None)  # fmt: skip

    def candidates(problem: Problem, placement: Placement) -> tuple[Plan, ...]:
        return _candidates(kind, problem.shape, problem.dtype, problem.param, placement.alignment,  # type: ignore[arg-type]
                           placement.sms, problem.order is not None)  # fmt: skip

    return choose, candidates


def _orders(scalars: dict[str, Any]) -> tuple[tuple[int, ...], ...]:
    return (common.CHANNELS_LAST,)


def _channels(problem: Problem) -> tuple[int, ...]:
    return (problem.shape[1],)


def _sums_shape(problem: Problem) -> tuple[int, ...]:
    return (problem.shape[1], 2)


def _acc(problem: Problem) -> str:
    return common.acc_dtype(problem.dtype)


def _undivided(describe: Describe) -> Describe:
    """The problem with count 1: the reduction then leaves its sums undivided, for the ranks to add."""

    def problem(named: dict[str, Any], scalars: dict[str, Any], backend: str) -> Problem:
        described = describe(named, scalars, backend)
        return dataclasses.replace(described, values={**described.values, "count": 1.0})

    return problem


def _with_sums(describe: Describe) -> Describe:
    """Also checks `sums`: [C, 2] in the accumulation type."""

    def problem(named: dict[str, Any], scalars: dict[str, Any], backend: str) -> Problem:
        described = describe(named, scalars, backend)
        common.expect_shape("sums", named["sums"], _sums_shape(described))
        got = arrays.dtype_name(named["sums"])
        if got != _acc(described):
            raise ArgumentError(f"sums: expected {_acc(described)} (the accumulation type of {described.dtype}), "
                                f"got {got}")  # fmt: skip
        return described

    return problem


def _op(name: str, doc: str, inputs: tuple[Input, ...], outputs: tuple[Output, ...], describe: Describe,
        kind: type, aligned: tuple[str, ...]) -> Op:  # fmt: skip
    choose, candidates = _plans(kind)
    return Op(name=name, doc=doc, inputs=inputs, scalars=(), outputs=outputs, describe=describe, choose=choose,
              candidates=candidates, kernels=(kind,), aligned=aligned, orders=_orders,
              fits=training.layout_fits, torch=True)  # fmt: skip


def _describe(name: str, same: tuple[str, ...], per_channel: tuple[str, ...], saved: tuple[str, ...]) -> Describe:
    return common.describe(name, "x", same, per_channel, saved, part=True)  # type: ignore[no-any-return]


def _statistic(name: str) -> Output:
    """A per-channel output in the accumulation type, zero where x is empty."""
    return Output(name, like="x", shape=_channels, sum=True, dtype=_acc)


MOMENTS = _op(
    "batch_norm_2d_moments",
    """(mean, m2) of x ([B, C, H, W], NCHW or channels_last): per channel the mean and M2, the sum of squared
    deviations from it, in the accumulation type (Welford batches merged pairwise, in a fixed order); zeros where x
    is empty. One rank's statistics for SyncBatchNorm, which merges them with the ranks' counts (B * H * W).""",
    (Input("x"),),
    (_statistic("mean"), _statistic("m2")),
    _describe("batch_norm_2d_moments", ("x",), (), ()),
    BatchNorm2dMoments,
    ("x",),
)

NORMALIZE = _op(
    "batch_norm_2d_normalize",
    """y = (x - save_mean) * save_invstd * weight + bias per channel, x ([B, C, H, W]) NCHW or channels_last (y in
    its memory format), with given batch statistics (SyncBatchNorm's, merged over the ranks) in the accumulation
    type; weight and bias in x's dtype, or f32 with bf16/f16 x.""",
    (Input("x"), Input("weight"), Input("bias"), *map(Input, SAVED)),
    (Output("y", like="x"),),
    _describe("batch_norm_2d_normalize", ("x",), ("weight", "bias"), SAVED),
    BatchNorm2dNormalize,
    ("x", "y"),
)

BACKWARD_SUMS = _op(
    "batch_norm_2d_backward_sums",
    """(dweight, dbias, sums) of this rank's part of a training-mode BatchNorm2d (dy, x NCHW or channels_last;
    save_mean, save_invstd the statistics it was normalised with): dbias = sum(dy), dweight = sum(dy * (x -
    save_mean)) * save_invstd per channel, in weight's dtype, and sums [C, 2] = (sum(dy), save_invstd^2 * sum(dy *
    (x - save_mean))) in the accumulation type: what the ranks add, then divide by the global count, for
    batch_norm_2d_backward_dx.""",
    (Input("dy"), Input("x"), Input("weight"), *map(Input, SAVED)),
    (
        Output("dweight", like="weight", sum=True),
        Output("dbias", like="weight", sum=True),
        Output("sums", like="save_mean", shape=_sums_shape, sum=True),
    ),
    _undivided(_describe("batch_norm_2d_backward_sums", ("x", "dy"), ("weight",), SAVED)),
    BatchNorm2dBackwardReduce,
    ("dy", "x"),
)

BACKWARD_DX = _op(
    "batch_norm_2d_backward_dx",
    """dx = weight * save_invstd * (dy - sums[:, 0] - (x - save_mean) * sums[:, 1]) per channel (dy, x NCHW or
    channels_last, dx in x's memory format), `sums` [C, 2] in the accumulation type: batch_norm_2d_backward_sums's,
    added over the ranks and divided by the global count.""",
    (Input("dy"), Input("x"), Input("weight"), *map(Input, SAVED), Input("sums")),
    (Output("dx", like="x"),),
    _with_sums(_describe("batch_norm_2d_backward_dx", ("x", "dy"), ("weight",), SAVED)),
    BatchNorm2dBackwardElementwise,
    ("dy", "x", "dx"),
)

OPS = (MOMENTS, NORMALIZE, BACKWARD_SUMS, BACKWARD_DX)
