from types import SimpleNamespace

import numpy as np
import pytest

from rust_kernels import ArgumentError
from rust_kernels.families.batch_norm import backward as plans
from rust_kernels.kernels import BatchNorm2dNchwBackwardWarp

H200_SMS = 132


def choice(shape, dtype="f32", alignment=16):
    p = plans.plan(shape, dtype, dtype, alignment, H200_SMS)
    if isinstance(p.kernel, BatchNorm2dNchwBackwardWarp):
        return "warp", p.kernel.block_hw, p.kernel.vectorized, p.value("CTAS")
    return "split", p.kernel.block_hw, p.kernel.vectorized, p.value("SPLIT")


@pytest.mark.parametrize(
    ("shape", "dtype", "expected"),
    [
        ((32, 256, 56, 56), "f32", ("split", 512, 1, 1)),  # C >= 1.5 CTAs per SM: one CTA per channel
        ((32, 64, 112, 112), "f32", ("split", 256, 1, 8)),  # few channels: split to about 2 CTAs per SM
        ((128, 128, 56, 56), "f32", ("split", 512, 1, 4)),
        ((32, 2048, 7, 7), "f32", ("warp", 128, 0, 512)),  # 1 568 single elements per channel: a warp each
        ((32, 1024, 14, 14), "bf16", ("split", 128, 2, 1)),  # 196: a multiple of 4 bf16 lanes, not 8: 8-byte packs
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


def array(shape, dtype="float32"):
    """What the op's problem description reads of an array: its shape and dtype (no memory behind it)."""
    return SimpleNamespace(shape=shape, dtype=np.dtype(dtype))


def test_per_channel_indexing_limit():
    x, per_channel = array((2**16, 1, 2**8, 2**8)), array((1,))
    named = {"dy": x, "x": x, "weight": per_channel, "running_mean": per_channel, "running_var": per_channel}
    with pytest.raises(ArgumentError, match=r"B \* H \* W = 4294967296 exceeds"):
        plans.NCHW.describe(named, {"eps": 1e-5, "deterministic": True}, "cuda")
