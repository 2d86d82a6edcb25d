from types import SimpleNamespace

import numpy as np
import pytest

from rust_kernels import ArgumentError
from rust_kernels.families.batch_norm import backward as plans
from rust_kernels.kernels import (
    BatchNorm2dFrozenBackwardGrouped,
    BatchNorm2dFrozenBackwardGroupedAct,
    BatchNorm2dNchwBackwardWarp,
)

H200_SMS = 132


def choice(shape, dtype="f32", alignment=16):
    p = plans.plan(shape, dtype, dtype, alignment, H200_SMS)
    if isinstance(p.kernel, BatchNorm2dNchwBackwardWarp):
        return "warp", p.kernel.block_hw, p.kernel.vectorized, p.value("CTAS")
    if isinstance(p.kernel, BatchNorm2dFrozenBackwardGrouped):
        return "grouped", p.value("COLS"), p.value("SPLIT")
    return "split", p.kernel.block_hw, p.kernel.vectorized, p.value("SPLIT")


@pytest.mark.parametrize(
    ("shape", "dtype", "expected"),
    [
        ((32, 256, 56, 56), "f32", ("split", 512, 1, 1)),  # C >= 1.5 CTAs per SM: one CTA per channel
        ((32, 64, 112, 112), "f32", ("split", 256, 1, 8)),  # few channels: split to about 2 CTAs per SM
        ((128, 128, 56, 56), "f32", ("split", 512, 1, 4)),
        ((32, 2048, 7, 7), "f32", ("warp", 128, 0, 512)),  # 1 568 single elements per channel: a warp each
        ((32, 1024, 14, 14), "bf16", ("grouped", 8, 2)),  # 196: not a multiple of 8 bf16 lanes; 12.8 MB: grouped
        ((8, 1024, 14, 14), "bf16", ("split", 128, 2, 1)),  # 3.2 MB: 8-byte packs (4 bf16 lanes divide 196)
        ((32, 1024, 14, 14), "f32", ("split", 128, 1, 1)),
        ((4, 8, 6, 7), "f32", ("split", 128, 2, 1)),  # 42: 2 f32 lanes
        ((32, 256, 56, 56), "f64", ("split", 512, 1, 1)),  # 16 bytes = 2 f64 lanes; an 8-byte pack of one is none
        ((8, 32, 8, 8), "f32", ("split", 128, 1, 1)),  # too little work to split
    ],
)
def test_plans_for_the_benchmark_shapes(shape, dtype, expected):
    assert choice(shape, dtype) == expected


def test_pack_width_follows_the_pointers_alignment():
    assert choice((32, 256, 56, 56), alignment=8)[2] == 2
    assert choice((32, 256, 56, 56), alignment=4)[2] == 0


def test_deterministic_mode_and_block_override():
    p = plans.plan((32, 64, 112, 112), "f32", "f32", 16, H200_SMS, deterministic=False, block_hw=128)
    assert (p.kernel.deterministic, p.kernel.block_hw) == (0, 128)


def grouped(shape, dtype, alignment=16):
    """The grouped kernel's (cols, split) among the autotuner's candidates."""
    out = plans._candidates(shape, dtype, dtype, alignment, H200_SMS, True)
    return [(p.value("COLS"), p.value("SPLIT")) for p in out if isinstance(p.kernel, BatchNorm2dFrozenBackwardGrouped)]


def test_the_grouped_kernel_is_a_candidate_where_no_16_byte_pack_divides_the_rows():
    # 7x7 bf16: groups of 32 channels (196 packs, at most a CTA's) and of 16; every split over the 128 images
    assert {c for c, _ in grouped((128, 992, 7, 7), "bf16")} == {32, 16}
    assert all(1 <= s <= 128 for _, s in grouped((128, 992, 7, 7), "bf16"))
    # 14x14 rows: 16-byte packs of f32 divide them (the split kernel reads them so); bf16's 8 lanes do not
    assert grouped((32, 992, 14, 14), "f32") == [] and {c for c, _ in grouped((32, 992, 14, 14), "bf16")} == {8, 4}
    # batch 1: no split (a slice is images)
    assert {s for _, s in grouped((1, 608, 7, 7), "bf16")} == {1}
    assert grouped((128, 992, 7, 7), "bf16", alignment=8) == []  # 16-byte packs need 16-byte aligned arrays
    assert grouped((2, 3, 35, 35), "bf16") == []  # 8 channels' rows are 1 225 packs: more than a CTA's threads


def test_the_grouped_kernel_is_a_candidate_through_a_fused_activation():
    out = plans._candidates((128, 992, 7, 7), "bf16", "f32", 16, H200_SMS, True, activation=2)
    acts = {p.kernel.activation for p in out if isinstance(p.kernel, BatchNorm2dFrozenBackwardGroupedAct)}
    assert acts == {2} and not any(isinstance(p.kernel, BatchNorm2dFrozenBackwardGrouped) for p in out)
    assert not any(isinstance(p.kernel, BatchNorm2dFrozenBackwardGroupedAct) for p in
                   plans._candidates((128, 992, 7, 7), "bf16", "f32", 16, H200_SMS, True))  # fmt: skip


@pytest.mark.parametrize(
    ("shape", "dtype", "expected"),
    [
        ((128, 992, 7, 7), "bf16", (31, 8, 32)),  # 12 MB of bf16 7x7 rows: groups of 32 channels, 8 slices
        ((128, 672, 7, 7), "bf16", (21, 8, 32)),  # 8.0 MiB: from GROUPED_RULE_BYTES on
        ((128, 480, 14, 14), "bf16", (60, 4, 8)),  # split to at most 2 CTAs an SM (264 on 132 SMs)
        ((32, 2048, 7, 7), "bf16", None),  # 6 MiB: the warp kernel
        ((128, 992, 7, 7), "f32", None),  # f32: the split kernel
        ((128, 992, 7, 7), "f16", (31, 8, 32)),
    ],
)
def test_the_rule_takes_the_grouped_kernel_on_large_16_bit_tensors_of_unpacked_rows(shape, dtype, expected):
    p = plans.plan(shape, dtype, dtype, 16, H200_SMS)
    got = (
        (p.grid[0], p.value("SPLIT"), p.value("COLS"))
        if isinstance(p.kernel, BatchNorm2dFrozenBackwardGrouped)
        else None
    )
    assert got == expected
    assert not isinstance(plans.plan(shape, dtype, dtype, 8, H200_SMS).kernel, BatchNorm2dFrozenBackwardGrouped)


@pytest.mark.parametrize(
    ("shape", "dtype", "expected"),
    [
        ((32, 2048, 7, 7), "bf16", (64, 4, 32)),  # 2 048 channels: groups of 32, 4 slices (256 CTAs on 132 SMs)
        ((1, 1024, 7, 7), "f32", (64, 1, 16)),  # batch 1: one slice
        ((32, 672, 7, 7), "f32", (42, 4, 16)),  # from 4 channels an SM (528 on 132 SMs) on
        ((32, 512, 7, 7), "bf16", None),  # fewer channels: the split kernel
        ((32, 992, 14, 14), "f32", None),  # 16-byte packs of f32 divide 14x14 rows
    ],
)
def test_through_an_activation_the_rule_takes_the_grouped_kernel_on_many_channels(shape, dtype, expected):
    p = plans.plan(shape, dtype, "f32", 16, H200_SMS, activation=1)
    grouped = isinstance(p.kernel, BatchNorm2dFrozenBackwardGroupedAct)
    assert ((p.grid[0], p.value("SPLIT"), p.value("COLS")) if grouped else None) == expected
    assert p.kernel.activation == 1
    assert not isinstance(plans.plan(shape, dtype, "f32", 8, H200_SMS, activation=1).kernel,
                          BatchNorm2dFrozenBackwardGroupedAct)  # fmt: skip


def test_the_grouped_kernel_splits_the_images_to_fill_2_ctas_an_sm_at_most():
    assert plans.grouped_split((32, 672, 7, 7), 32, H200_SMS) == 8  # 21 groups x 8 = 168 CTAs; 16 would be 336
    assert plans.grouped_split((8, 2048, 7, 7), 32, H200_SMS) == 4  # 64 x 4 = 256
    assert plans.grouped_split((2, 64, 7, 7), 32, H200_SMS) == 2  # never more slices than images
    assert plans.grouped_split((128, 8192, 7, 7), 16, H200_SMS) == 1  # 512 groups: over 2 CTAs an SM already
    # the default split is a candidate
    out = plans._candidates((8, 512, 7, 7), "bf16", "f32", 16, H200_SMS, True, activation=1)
    assert (8, 32) in {(p.value("SPLIT"), p.value("COLS")) for p in out if "grouped" in p.kernel.name}


def array(shape, dtype="float32"):
    """What the op's problem description reads of an array: its shape and dtype (no memory behind it)."""
    return SimpleNamespace(shape=shape, dtype=np.dtype(dtype))


def test_per_channel_indexing_limit():
    x, per_channel = array((2**16, 1, 2**8, 2**8)), array((1,))
    named = {"dy": x, "x": x, "weight": per_channel, "running_mean": per_channel, "running_var": per_channel}
    with pytest.raises(ArgumentError, match=r"B \* H \* W = 4294967296 exceeds"):
        plans.NCHW.describe(named, {"eps": 1e-5, "deterministic": True}, "cuda")


def test_every_gpu_check_plan_runs_on_its_op_and_a_cooperative_grid_fits_two_ctas_an_sm():
    """`check --backend cuda` lists plans its ops run: one an op refuses (the add + ReLU backward listed the persistent
    and cooperative gradients, which it refuses) or a cooperative grid the GPU cannot hold at once (three slices of a
    256-block grid) failed there as errors, never reaching the bound."""
    from rust_kernels import check
    from rust_kernels.families.batch_norm.verify_training import LISTED_SMS

    cases = check.cases("cuda")
    refused = {(f.op.name, p.label) for f, p, _ in cases
               if not all(isinstance(q.kernel, f.op.kernels) for q in p.launches)}  # fmt: skip
    assert not refused
    too_large = {(p.label, s) for _, p, s in cases for q in p.launches
                 if q.kernel.spec.cooperative and q.grid[0] * q.grid[1] * q.grid[2] > 2 * LISTED_SMS}  # fmt: skip
    assert not too_large
    assert any(f.op.name == "batch_norm_2d_add_relu_backward" for f, _, _ in cases)
