"""Launch plans for BatchNorm2d NCHW backward: which kernel instance and how many CTAs per channel, per shape.

The kernel moves 3 x numel x sizeof(D) bytes, so it is memory-bound: the plan's job is to keep every SM streaming.
One CTA per channel leaves SMs idle when C is small, so each channel is split over enough CTAs to fill the GPU
several times over, as long as each CTA keeps a few strides of work; 16-byte vector accesses are used when H*W and
the pointers allow.
"""

from __future__ import annotations

from dataclasses import dataclass

from rust_kernels.errors import ArgumentError
from rust_kernels.kernels import BatchNorm2dNchwBackward, BatchNorm2dNchwBackwardSplit, Kernel  # type: ignore[attr-defined]
from rust_kernels.spec import DTYPES

BLOCK = 256
RESIDENT_CTAS_PER_SM = 2048 // BLOCK  # H100/H200: 2048 threads per SM
MIN_STRIDES_PER_CTA = 4  # below this a CTA's fixed costs (statistics, reductions) dominate
MAX_SPLIT = 64


@dataclass(frozen=True)
class Plan:
    kernel: Kernel
    split: int = 1  # CTAs per channel (split kernel only)

    @property
    def uses_workspace(self) -> bool:
        return self.kernel.name == BatchNorm2dNchwBackwardSplit.spec.name

    def grid(self, channels: int) -> tuple[int, int, int]:
        return (channels, self.split, 1)


def lanes(dtype: str) -> int:
    """Elements per 16-byte pack."""
    return 16 // DTYPES[dtype].size


def choose(
    shape: tuple[int, int, int, int],
    dtype: str,
    aligned: bool,
    sms: int,
    deterministic: bool = True,
    block_hw: int | None = None,
) -> Plan:
    """The plan for an NCHW shape; `aligned`: dy, x and dx all start on 16-byte boundaries."""
    batches, channels, height, width = shape
    hw = height * width
    if batches * hw >= 2**32:
        raise ArgumentError(f"x: B * H * W = {batches * hw} exceeds the kernel's 32-bit per-channel indexing")
    vectorized = aligned and hw % lanes(dtype) == 0
    block = block_hw or BLOCK
    units = batches * hw // (lanes(dtype) if vectorized else 1)
    split = 1
    while (
        split < MAX_SPLIT
        and channels * split < sms * RESIDENT_CTAS_PER_SM
        and units // (split * 2) >= block * MIN_STRIDES_PER_CTA
    ):
        split *= 2
    kernel = BatchNorm2dNchwBackwardSplit(block, int(vectorized), int(deterministic), dtype=dtype)
    return Plan(kernel, split)


def seed(block_hw: int, dtype: str) -> Plan:
    """The original kernel: one CTA per channel."""
    return Plan(BatchNorm2dNchwBackward(block_hw=block_hw, dtype=dtype))
