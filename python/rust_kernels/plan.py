"""Launch plans for BatchNorm2d NCHW backward: which kernel instance and how many CTAs per channel, per shape.

The kernel moves 3 x numel x sizeof(D) bytes, so it is memory-bound: the plan's job is to keep every SM streaming.
One CTA per channel leaves SMs idle when C is small, so each channel is then split over several CTAs, as long as
each keeps enough work; 16- or 8-byte vector accesses are used when H*W and the pointers allow; channels too small
for a CTA (a few thousand single elements) get a warp each.
"""

from __future__ import annotations

from dataclasses import dataclass

from rust_kernels.errors import ArgumentError
from rust_kernels.kernels import (  # type: ignore[attr-defined]
    BatchNorm2dNchwBackward,
    BatchNorm2dNchwBackwardSplit,
    BatchNorm2dNchwBackwardWarp,
    Kernel,
)
from rust_kernels.spec import DTYPES

MAX_SPLIT = 64
# Channels of at most this many single elements (no packs possible) go to the warp-per-channel kernel. Measured on
# the H200: (32,2048,7,7) f32 20.7 -> 19.0 us, bf16 14.8 -> 14.4 us; with packs, or more elements per channel, a
# CTA per channel is faster.
WARP_MAX_UNITS = 2048
# A CTA that gets less than this many units (elements or packs) spends more on its fixed costs (statistics,
# reductions) than on streaming: 2 unrolled steps of a 128-thread CTA.
MIN_UNITS_PER_CTA = 1024


@dataclass(frozen=True)
class Plan:
    kernel: Kernel
    split: int = 1  # CTAs per channel (split kernel)
    ctas: int = 0  # CTAs in the grid (warp kernel)

    @property
    def kind(self) -> str:
        """ "seed", "split" or "warp"."""
        return self.kernel.name.removeprefix(BatchNorm2dNchwBackward.spec.name).removeprefix("_") or "seed"

    @property
    def uses_workspace(self) -> bool:
        return self.kind == "split"

    def grid(self, channels: int) -> tuple[int, int, int]:
        return (self.ctas, 1, 1) if self.kind == "warp" else (channels, self.split, 1)


def unit_elements(vectorized: int, dtype: str) -> int:
    """Elements the split kernel moves at once: one, or a 16-byte (vectorized 1) or 8-byte (2) pack."""
    return {0: 1, 1: 16, 2: 8}[vectorized] // (1 if vectorized == 0 else DTYPES[dtype].size)


def vector_mode(hw: int, dtype: str, alignment: int) -> int:
    """The widest pack that divides every row (H*W elements) and the pointers' alignment, if it holds 2+ lanes."""
    for mode, nbytes in ((1, 16), (2, 8)):
        lanes = unit_elements(mode, dtype)
        if alignment % nbytes == 0 and lanes >= 2 and hw % lanes == 0:
            return mode
    return 0


def choose(
    shape: tuple[int, int, int, int],
    dtype: str,
    alignment: int,
    sms: int,
    deterministic: bool = True,
    block_hw: int | None = None,
) -> Plan:
    """The plan for an NCHW shape; `alignment`: a power of two (at most 16) dividing the addresses of dy, x, dx."""
    batches, channels, height, width = shape
    hw = height * width
    if batches * hw >= 2**32:
        raise ArgumentError(f"x: B * H * W = {batches * hw} exceeds the kernel's 32-bit per-channel indexing")
    vectorized = vector_mode(hw, dtype, alignment)
    units = batches * hw // unit_elements(vectorized, dtype)
    if vectorized == 0 and units <= WARP_MAX_UNITS:
        return warp(channels, block_hw or 128, 0, dtype)
    # Measured on the H200 (bench and a sweep of block x split per shape): with C of 1.5 CTAs per SM or more, one
    # CTA per channel is best; fewer channels are split until there are about 2 CTAs per SM, as long as each CTA
    # keeps enough work. Bigger CTAs pay off only when each has a lot to stream.
    split = 1
    if channels < sms * 3 // 2:
        while split < MAX_SPLIT and channels * split < 2 * sms and units // (2 * split) >= MIN_UNITS_PER_CTA:
            split *= 2
    per_cta = units // split
    block = block_hw or (512 if per_cta >= 16384 else 256 if per_cta >= 4096 else 128)
    kernel = BatchNorm2dNchwBackwardSplit(block, vectorized, int(deterministic), dtype=dtype)
    return Plan(kernel, split)


def warp(channels: int, block_hw: int, vectorized: int, dtype: str) -> Plan:
    """The warp-per-channel kernel, with a warp for every channel."""
    kernel = BatchNorm2dNchwBackwardWarp(block_hw, vectorized, dtype=dtype)
    return Plan(kernel, ctas=max(1, -(-channels // (block_hw // 32))))


def seed(block_hw: int, dtype: str) -> Plan:
    """The original kernel: one CTA per channel."""
    return Plan(BatchNorm2dNchwBackward(block_hw=block_hw, dtype=dtype))
