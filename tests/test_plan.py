import pytest

from rust_kernels import ArgumentError
from rust_kernels import plan as plans

H200_SMS = 132


def choice(shape, dtype="f32", aligned=True):
    p = plans.choose(shape, dtype, aligned, H200_SMS)
    return p.kernel.block_hw, p.kernel.vectorized, p.split


@pytest.mark.parametrize(
    ("shape", "dtype", "expected"),
    [
        ((32, 256, 56, 56), "f32", (512, 1, 1)),  # C >= 1.5 CTAs per SM: one CTA per channel
        ((32, 64, 112, 112), "f32", (256, 1, 8)),  # few channels: split to about 2 CTAs per SM
        ((128, 128, 56, 56), "f32", (512, 1, 4)),
        ((32, 2048, 7, 7), "f32", (128, 0, 1)),  # H*W = 49: no 16-byte packs
        ((32, 1024, 14, 14), "bf16", (256, 0, 1)),  # 196 is not a multiple of 8 bf16 lanes
        ((8, 32, 8, 8), "f32", (128, 1, 1)),  # too little work to split
    ],
)
def test_plans_for_the_benchmark_shapes(shape, dtype, expected):
    assert choice(shape, dtype) == expected


def test_unaligned_pointers_are_not_vectorized():
    assert choice((32, 256, 56, 56), aligned=False)[1] == 0


def test_deterministic_mode_and_block_override():
    p = plans.choose((32, 64, 112, 112), "f32", True, H200_SMS, deterministic=False, block_hw=128)
    assert (p.kernel.deterministic, p.kernel.block_hw) == (0, 128)


def test_per_channel_indexing_limit():
    with pytest.raises(ArgumentError, match=r"B \* H \* W = 4294967296 exceeds"):
        plans.choose((2**16, 1, 2**8, 2**8), "f32", True, H200_SMS)
