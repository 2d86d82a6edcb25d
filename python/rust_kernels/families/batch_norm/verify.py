"""What verifies the BatchNorm2d NCHW eval ops: the inputs, shape, layout and dtype spaces, the float64 references
and the tolerance models (error bounds derived from the arithmetic, never tuned).

Backward. With u the unit roundoff of the kernel's accumulation type (f32 for f32, bf16 and f16 storage; f64 for
f64) and u64 = 2^-53 that of the float64 reference:
- dx = weight * rstd * dy: 5 roundings in the kernel (add, sqrt and divide for rstd; two products), bounded with
  second-order terms by 6u |dx|; 5 in the reference, bounded by 6 u64 |dx|.
- Sums: n terms added along a tree of depth d err by at most gamma_d * sum|terms|, gamma_d = d u / (1 - d u)
  (Higham, Accuracy and Stability, 4.2); summation_depth gives d for each plan. dbias: gamma_d * sum|dy|. dweight:
  its terms dy * (x - mean) carry 2 roundings each (gamma_(d+2)), and the final product with rstd (itself 3
  roundings) 4 more: (1 + 5u) rstd gamma_(d+2) sum|dy (x - mean)| + 5u |dweight|. The reference sums with math.fsum
  (one rounding), so its error is its terms' roundings: 3 u64 rstd sum|terms| + 6 u64 |dweight| and 2 u64 sum|dy|.
- Storage: bf16 and f16 results are rounded from the f32 value once more: |fl(y^) - y| <= us |y| + (1 + us) |y^ - y|,
  us = 2^-8 (bf16) or 2^-11 (f16); f32 and f64 results are stored as computed (us = 0).
- An absolute floor covers underflow in the accumulation type and rounding to a subnormal of the storage type.

Forward. y = (x - mean) * scale + bias with scale = weight * rstd, rstd = 1 / sqrt(var + eps): rstd carries 3
roundings and scale 1 more, (x - mean) 1 and the product 1, so t = (x - mean) * scale is within gamma_6 |t|; the
final add rounds once: |y^ - y| <= gamma_6 |t| + u (1 + gamma_6)(|t| + |bias|), bounded by 8u (|t| + |bias|). The
float64 reference errs by the same count in u64. bf16/f16 storage adds us |y|.
"""

from __future__ import annotations

import math

import numpy as np

from rust_kernels.dtypes import DTYPES
from rust_kernels.families.batch_norm import backward, common, forward, training
from rust_kernels.kernels import (  # type: ignore[attr-defined]
    BatchNorm2dFrozenBackwardGrouped,
    BatchNorm2dFrozenBackwardGroupedAct,
    BatchNorm2dNchwBackward,
    BatchNorm2dNchwBackwardWarp,
)
from rust_kernels.reference import fsum_rows
from rust_kernels.registry import Family, Layout, Space
from rust_kernels.runtime import Plan

U64 = 2.0**-53
LISTED_SMS = 132  # the H200's SMs, for the grids of the plans checks list (listed without asking a device)
# NCHW arrays; channels-last views (NHWC storage behind an NCHW shape) must be refused, never read as NCHW.
LAYOUTS = (Layout("contiguous", (0, 1, 2, 3), True), Layout("channels_last", (0, 2, 3, 1), False))
# The host emulator runs every thread of a CTA as an OS thread (about 0.1 ms each): few channels and rows there.
SPACES = {
    "host": Space(
        dims=((1, 2, 3), (1, 2, 3, 5), (1, 2, 3, 4, 7, 13, 16), (1, 2, 3, 5, 8, 17, 31, 64, 1031)),
        max_log2_elements=12,
        scalars={"eps": (1e-5, 0.0, 1e-3, 0.1, 1.0, 1e3)},
    ),
    "cuda": Space(
        dims=(
            (1, 2, 3, 4, 5, 8, 16, 32, 64),
            (1, 2, 3, 4, 7, 16, 33, 61, 130, 256, 1031, 2053),
            (1, 2, 3, 5, 7, 13, 14, 28, 31, 56, 112),
            (1, 2, 3, 4, 5, 7, 8, 14, 17, 28, 56, 64, 112, 1031, 4099),
        ),
        max_log2_elements=22,
        scalars={"eps": (1e-5, 0.0, 1e-12, 1e-3, 0.1, 1.0, 1e3)},
    ),
}
SANITIZE_SHAPES = [
    (2, 3, 5, 8),  # H*W = 40: a multiple of every pack's lanes and of no CTA; split 16 leaves CTAs without units
    (3, 40, 1, 7),  # 40 channels of 21 single elements: the warp kernel over 10 CTAs, and 1 CTA striding
    (4, 2, 31, 33),  # 4 092 single elements per channel: several unrolled steps per thread
    (2, 2, 48, 64),  # H*W = 3 072: several vectorized steps per thread
    (3, 8, 7, 7),  # 7x7 rows: the grouped kernel, unsplit and over 3 slices
]


def _packs(shape: tuple[int, ...], dtype: str) -> list[int]:
    """The vectorized modes whose packs divide a row (H*W)."""
    return [v for v in (0, 1, 2) if shape[2] * shape[3] % common.unit_elements(v, dtype) == 0]


class _BatchNorm2d(Family):
    """What both eval ops' verification shares: dtype keys, spaces, layouts, sanitizer shapes, eps."""

    dtypes = common.DTYPE_KEYS
    spaces = SPACES
    layouts = LAYOUTS
    sanitize_shapes = SANITIZE_SHAPES
    scalars = {"eps": 1e-5}  # noqa: RUF012


class Backward(_BatchNorm2d):
    op = backward.NCHW
    suites = {  # noqa: RUF012
        "cuda": [(2, 3, 5, 7), (4, 8, 17, 19), (16, 8, 1, 1), (1, 16, 32, 32), (8, 1, 28, 28), (2, 4, 256, 256),
                 (32, 64, 28, 28), (3, 5, 1, 1031), (3, 4, 6, 7), (4, 16, 14, 14), (8, 24, 7, 7)],
        "host": [(2, 3, 5, 7), (4, 8, 17, 19), (16, 8, 1, 1), (1, 4, 32, 32), (8, 1, 28, 28), (1, 2, 128, 128),
                 (2, 3, 6, 7), (2, 5, 14, 14), (3, 8, 7, 7)],
    }  # fmt: skip
    # CTA sizes and splits each check covers; exhaustive: every CTA size of every kernel (the sanitizer's run).
    seed_blocks = {"cuda": (32, 256, 1024), "host": (32, 256, 1024), "every": (32, 64, 128, 256, 512, 1024)}  # noqa: RUF012
    variant_blocks = {"cuda": (128, 512), "host": (128,), "every": (128, 256, 512)}  # noqa: RUF012
    splits = {"cuda": (1, 3, 16), "host": (1, 3), "every": (1, 3, 16)}  # noqa: RUF012

    def inputs(self, shape: tuple[int, ...], dtype: str, seed: int = 0) -> dict[str, np.ndarray]:
        names = ("dy", "x", "weight", "running_mean", "running_var")
        return common.random_inputs(shape, dtype, seed, names)  # type: ignore[arg-type]

    def reference(self, inputs: dict[str, np.ndarray], plan: Plan) -> tuple[np.ndarray, ...]:
        """(dx, dweight, dbias) in float64; sums by math.fsum (correctly rounded). eps as the kernel receives it."""
        dy, x = (np.asarray(inputs[n], np.float64) for n in ("dy", "x"))
        weight, mean = (np.asarray(inputs[n], np.float64) for n in ("weight", "running_mean"))
        rstd = common.rstd(inputs["running_var"], common.kernel_eps(plan.kernel, self.scalars["eps"]))
        per_channel = (slice(None), None, None)
        dx = (weight * rstd)[per_channel] * dy
        batches, channels, height, width = dy.shape
        per_channel_shape = (channels, batches * height * width)  # not (channels, -1): C may be 0
        terms = (dy * (x - mean[per_channel])).transpose(1, 0, 2, 3).reshape(per_channel_shape)
        dys = dy.transpose(1, 0, 2, 3).reshape(per_channel_shape)
        dweight = fsum_rows(terms) * rstd
        dbias = fsum_rows(dys)
        return dx, dweight, dbias

    def plans(self, backend: str, shape: tuple[int, ...], dtype: str, exhaustive: bool = False) -> list[Plan]:
        """The seed kernel at three CTA sizes; the split kernel in each mode with and without splitting; the warp
        kernel with a warp per channel and with one CTA striding over all channels (vectorized variants only where
        their packs divide H*W); the grouped kernel where it fits, at each of its widths, unsplit and split. Mixed
        keys (bf16-f32) check the mixed-precision instances."""
        sizes = "every" if exhaustive else backend
        storage, param = common.split_key(dtype)
        channels = shape[1]
        out = [] if param != storage else [backward.seed(channels, b, storage) for b in self.seed_blocks[sizes]]
        for block in self.variant_blocks[sizes]:
            for vectorized in _packs(shape, storage):
                for det in (0, 1):
                    out += [backward.split(channels, block, vectorized, det, storage, param, s)
                            for s in self.splits[sizes]]  # fmt: skip
                out += [backward.warp(channels, block, vectorized, storage, param)]
                out += [backward.warp(channels, block, vectorized, storage, param, ctas=1)]
        if backward.grouped_fits(shape, storage, 16):  # type: ignore[arg-type]
            sms = 1 if backend == "host" else LISTED_SMS
            out += [
                backward.grouped(shape, storage, param, sms, s, cols)  # type: ignore[arg-type]
                for cols in backward.group_widths(shape, storage)
                for s in self.splits[sizes]
            ]
        return out

    def depth(self, plan: Plan, shape: tuple[int, ...]) -> int:
        """The longest chain of additions behind a channel's sums (the tolerances' d)."""
        return summation_depth(plan, shape)

    def tolerances(
        self, plan: Plan, shape: tuple[int, ...], inputs: dict[str, np.ndarray], ref: tuple[np.ndarray, ...]
    ) -> list[np.ndarray]:
        dtype, param = plan.kernel.dtype, plan.kernel.param_dtype
        dy, x, var, mean = (np.asarray(inputs[n], np.float64) for n in ("dy", "x", "running_var", "running_mean"))
        u = DTYPES[dtype].unit_roundoff
        # dx is stored in the activations' type, dweight and dbias in the parameters'.
        storage = [DTYPES[d].storage_roundoff for d in (dtype, param, param)]
        depth = self.depth(plan, shape)
        rstd = common.rstd(var, common.kernel_eps(plan.kernel, self.scalars["eps"]))
        abs_dy = np.abs(dy).sum(axis=(0, 2, 3))
        abs_terms = np.abs(dy * (x - mean[:, None, None])).sum(axis=(0, 2, 3))
        dx, dweight, dbias = (np.abs(r) for r in ref)
        kernel = [
            6 * u * dx,
            (1 + 5 * u) * rstd * common.gamma(u, depth + 2) * abs_terms + 5 * u * dweight,
            common.gamma(u, depth) * abs_dy,
        ]
        reference = [6 * U64 * dx, 3 * U64 * rstd * abs_terms + 6 * U64 * dweight, 2 * U64 * abs_dy]
        tiny = common.floor(dtype)
        return [
            (1 + us) * k + us * r + e + tiny
            for us, k, r, e in zip(storage, kernel, (dx, dweight, dbias), reference, strict=True)
        ]


def summation_depth(plan: Plan, shape: tuple[int, ...]) -> int:
    """The longest chain of additions behind a channel sum: each thread's sequential terms, 5 butterfly levels
    within a warp and 5 over the warps; for a split plan also the partials (one per CTA of the channel, added in a
    chain by float atomics in the worst case) and a second 10-level block reduction."""
    batches, _, height, width = shape
    block = plan.kernel.block_dim[0]
    if isinstance(plan.kernel, BatchNorm2dNchwBackward):
        return batches * math.ceil(height * width / block) + 10
    if isinstance(plan.kernel, BatchNorm2dNchwBackwardWarp):  # each lane walks the channel, then 5 butterflies
        return math.ceil(batches * height * width / 32) + 16 + 5
    if isinstance(plan.kernel, (BatchNorm2dFrozenBackwardGrouped, BatchNorm2dFrozenBackwardGroupedAct)):
        # a thread's lanes of the channel in each of its slice's images, then the CTA's partials of the channel in a
        # chain (at most one a thread), the slices in a chain and a tree over the CTA
        slices, lanes = int(plan.value("SPLIT")), common.unit_elements(training.GROUPS, plan.kernel.dtype)
        return math.ceil(batches / slices) * lanes + block + slices + 10
    slices = int(plan.value("SPLIT"))
    elements = math.ceil(batches * height * width / slices)
    per_thread = math.ceil(elements / block) + 16  # + one pack's lanes, where a slice ends inside a stride
    return per_thread + 10 + slices + 10


class ForwardInference(_BatchNorm2d):
    op = forward.NCHW
    suites = {  # noqa: RUF012
        "cuda": [(2, 3, 5, 7), (4, 8, 17, 19), (16, 8, 1, 1), (1, 16, 32, 32), (32, 64, 28, 28), (3, 5, 1, 1031)],
        "host": [(2, 3, 5, 7), (4, 8, 17, 19), (16, 8, 1, 1), (1, 4, 32, 32), (2, 3, 6, 7)],
    }
    blocks = {"cuda": (32, 128, 1024), "host": (32, 128, 1024), "every": (32, 64, 128, 256, 512, 1024)}  # noqa: RUF012
    flat_blocks = {"cuda": (128, 512), "host": (128,), "every": (128, 256, 512)}  # noqa: RUF012

    def inputs(self, shape: tuple[int, ...], dtype: str, seed: int = 0) -> dict[str, np.ndarray]:
        names = ("x", "weight", "bias", "running_mean", "running_var")
        return common.random_inputs(shape, dtype, seed, names)  # type: ignore[arg-type]

    def _terms(self, inputs: dict[str, np.ndarray], plan: Plan) -> tuple[np.ndarray, np.ndarray]:
        """t = (x - mean) * weight * rstd and the bias, broadcast per channel, in float64."""
        x, weight, bias, mean = (np.asarray(inputs[n], np.float64) for n in ("x", "weight", "bias", "running_mean"))
        rstd = common.rstd(inputs["running_var"], common.kernel_eps(plan.kernel, self.scalars["eps"]))
        per_channel = (slice(None), None, None)
        return (x - mean[per_channel]) * (weight * rstd)[per_channel], np.broadcast_to(bias[per_channel], x.shape)

    def reference(self, inputs: dict[str, np.ndarray], plan: Plan) -> tuple[np.ndarray, ...]:
        t, bias = self._terms(inputs, plan)
        return (t + bias,)

    def plans(self, backend: str, shape: tuple[int, ...], dtype: str, exhaustive: bool = False) -> list[Plan]:
        """The seed kernel at several CTA sizes; the flat kernel in every pack that divides H*W, with the op's grid
        and with one CTA striding over everything; the tiled kernel in every pack (one CTA size on the host); where
        no pack divides H*W, the packed frozen forward, with its grid and with one CTA."""
        sizes = "every" if exhaustive else backend
        storage, param = common.split_key(dtype)
        out = [forward.seed(shape, storage, param, block) for block in self.blocks[sizes]]  # type: ignore[arg-type]
        sms = 1 if backend == "host" else LISTED_SMS
        for block in self.flat_blocks[sizes]:
            for vectorized in _packs(shape, storage):
                own = forward.flat(shape, storage, param, vectorized, sms, block)  # type: ignore[arg-type]
                out += [own, Plan(own.kernel, (1, 1, 1), (("CTAS", 1),))]
        for block in forward.TILED_BLOCKS if sizes != "host" else forward.TILED_BLOCKS[:1]:
            tiles = [forward.tiled(shape, storage, param, v, block) for v in _packs(shape, storage)]  # type: ignore[arg-type]
            out += tiles
        if training.flat_fits(shape, storage):  # type: ignore[arg-type]
            own = forward.packed(shape, storage, param, sms)  # type: ignore[arg-type]
            out += [own, Plan(own.kernel, (1, 1, 1), (("CTAS", 1),))]
        return out

    def tolerances(
        self, plan: Plan, shape: tuple[int, ...], inputs: dict[str, np.ndarray], ref: tuple[np.ndarray, ...]
    ) -> list[np.ndarray]:
        dtype = plan.kernel.dtype
        u, us = DTYPES[dtype].unit_roundoff, DTYPES[dtype].storage_roundoff
        t, bias = self._terms(inputs, plan)
        magnitude = np.abs(t) + np.abs(bias)
        y = np.abs(ref[0])
        return [(1 + us) * 8 * u * magnitude + us * y + 8 * U64 * magnitude + common.floor(dtype)]


FAMILIES = (Backward(), ForwardInference())
