"""What verifies the RMSNorm forward op: its inputs, shape, layout and dtype spaces, the float64 reference and the
tolerance model (an error bound derived from the arithmetic, never tuned).

The kernel computes, in the accumulation type (unit roundoff u: 2^-24 for f32, bf16 and f16; 2^-53 for f64),
S = sum_c x[c]^2, m = S / n, v = m + eps, s = sqrt(v), r = 1 / s and y = (x * r) * weight. Each rounding is a factor
(1 + delta), |delta| <= u, and the bound follows them one by one (relative_error):
- S: each square rounds once and each term then meets at most d additions along the reduction, d = the thread's
  sequential terms ceil(cols / BLOCK) + 5 butterfly levels within a warp + 5 over the warps; the terms are
  non-negative, so |S^ - S| <= gamma_(d+1) S, gamma_k = k u / (1 - k u) (Higham, Accuracy and Stability, 4.2).
- m: n in the accumulation type (exact in f64, one rounding in f32 past 2^24) and the division: factors
  (1 + d2) / (1 + d1), bounded above and below separately.
- v: eps >= 0 (as the kernel receives it: an f32 argument beside f32, bf16 and f16) adds no relative error, the add
  rounds once.
- s: sqrt(1 + e) for the relative error e of v, then one rounding; r: one rounding of 1 / s^ (the lower bound of s^
  gives the upper one of r^); y: two products, two roundings.
The float64 reference (math.fsum for S: correctly rounded; squares exact except for f64 inputs, where they round
once) follows the same chain with u64 = 2^-53 and d = 1, its divide x / s counting as the kernel's reciprocal.
So |y^ - y| <= e_k |y| and |ref - y| <= e_r |y|; bf16 and f16 results are rounded once more when stored,
|fl(y^) - y| <= us |y| + (1 + us) |y^ - y|, us = 2^-8 (bf16) or 2^-11 (f16), and |y| <= |ref| / (1 - e_r). An
absolute floor covers underflow in the accumulation type and rounding to a subnormal of the storage type.
"""

from __future__ import annotations

import math

import numpy as np

from rust_kernels.dtypes import DTYPES
from rust_kernels.families.rms_norm import forward
from rust_kernels.kernels import Kernel
from rust_kernels.reference import fsum_rows
from rust_kernels.registry import Family, Layout, Space
from rust_kernels.runtime import Plan

U64 = 2.0**-53
MIXED = {"bf16-f32": ("bf16", "f32"), "f16-f32": ("f16", "f32")}  # bf16/f16 activations, f32 weight
DTYPE_KEYS = ("f32", "f64", "bf16", "f16", *MIXED)


def split_key(key: str) -> tuple[str, str]:
    """(activations' dtype, weight's dtype) of a dtype key."""
    return MIXED.get(key, (key, key))


def kernel_eps(kernel: Kernel, eps: float) -> float:
    """eps as the kernel receives it: an argument of the accumulation type (f32 beside f32, bf16, f16)."""
    return float(np.float32(eps)) if kernel.dtype_info.acc == "f32" else float(eps)


def gamma(u: float, n: int) -> float:
    """Higham's gamma_n = n u / (1 - n u): the relative error bound of n roundings (none where n u >= 1)."""
    return n * u / (1 - n * u) if n * u < 1 else math.inf


def relative_error(u: float, depth: int) -> float:
    """The bound e with |y^ - y| <= e |y| for the chain in the module's docstring, `depth` additions deep."""
    sum_hi = sum_lo = gamma(u, depth + 1)
    mean_hi = (1 + sum_hi) * (1 + u) / (1 - u) - 1  # S^ / n^, n^ = n (1 + d1), the division (1 + d2)
    mean_lo = 1 - (1 - sum_lo) * (1 - u) / (1 + u)
    var_hi, var_lo = (1 + mean_hi) * (1 + u) - 1, 1 - (1 - mean_lo) * (1 - u)  # + eps (>= 0), one rounding
    root_hi, root_lo = math.sqrt(1 + var_hi) * (1 + u) - 1, 1 - math.sqrt(1 - var_lo) * (1 - u)
    rrms_hi, rrms_lo = (1 + u) / (1 - root_lo) - 1, 1 - (1 - u) / (1 + root_hi)
    return max((1 + rrms_hi) * (1 + u) ** 2 - 1, 1 - (1 - rrms_lo) * (1 - u) ** 2)


def summation_depth(plan: Plan, cols: int) -> int:
    """The longest chain of additions behind a row's sum of squares: the thread's sequential terms, then 5
    butterfly levels within a warp and 5 over the warps (block_sum)."""
    return math.ceil(cols / plan.kernel.block_dim[0]) + 10


def floor(dtype: str) -> float:
    """Absolute floor: underflow in the accumulation type and rounding to a subnormal of storage."""
    info = DTYPES[dtype]
    return float(np.finfo(info.acc_numpy).tiny) * 4 + info.smallest_subnormal


class Forward(Family):
    op = forward.RMS_NORM
    dtypes = DTYPE_KEYS
    suites = {  # noqa: RUF012
        "cuda": [(1, 1), (3, 5), (4, 33), (2, 128), (5, 257), (64, 1000), (16, 4096), (1031, 768), (3, 12289),
                 (256, 8192)],
        "host": [(1, 1), (3, 5), (4, 33), (2, 128), (5, 257)],
    }  # fmt: skip
    # The host emulator runs every thread of a CTA as an OS thread: few rows there.
    spaces = {  # noqa: RUF012
        "host": Space(
            dims=((1, 2, 3, 5), (1, 2, 3, 7, 16, 33, 64, 130)),
            max_log2_elements=10,
            scalars={"eps": (1e-6, 0.0, 1e-3, 1.0)},
        ),
        "cuda": Space(
            dims=(
                (1, 2, 3, 4, 7, 16, 64, 256, 1031, 4096),
                (1, 2, 3, 7, 16, 33, 64, 130, 256, 768, 1000, 1024, 4096, 8192, 12289),
            ),
            max_log2_elements=22,
            scalars={"eps": (1e-6, 0.0, 1e-12, 1e-5, 1e-3, 1.0, 1e3)},
        ),
    }
    # Row-major [rows, cols]; a transposed view (column-major storage behind the shape) must be refused.
    layouts = (Layout("contiguous", (0, 1), True), Layout("transposed", (1, 0), False))
    sanitize_shapes = [  # noqa: RUF012
        (3, 5),  # fewer columns than any CTA has threads: idle threads in every reduction level
        (4, 33),  # one column past a warp
        (2, 1031),  # several strides per thread, the last one partial
    ]
    scalars = {"eps": 1e-6}  # noqa: RUF012
    # CTA sizes each check covers, besides the op's own choice; exhaustive: every one (the sanitizer's run).
    blocks = {"cuda": (32, 128, 256, 1024), "host": (32, 256), "every": (32, 64, 128, 256, 512, 1024)}  # noqa: RUF012

    def inputs(self, shape: tuple[int, ...], dtype: str, seed: int = 0) -> dict[str, np.ndarray]:
        """x of scale 2 around 0.5, weight in [0.5, 1.5], rounded to the storage types of dtype key `dtype`."""
        rng = np.random.default_rng(seed)
        activations, parameters = (DTYPES[d].numpy_dtype() for d in split_key(dtype))
        x = (rng.standard_normal(shape) * 2 + 0.5).astype(activations)
        weight = rng.uniform(0.5, 1.5, shape[1]).astype(parameters)
        return {"x": x, "weight": weight}

    def reference(self, inputs: dict[str, np.ndarray], plan: Plan) -> tuple[np.ndarray, ...]:
        """y in float64: the sum of squares by math.fsum (correctly rounded), eps as the kernel receives it."""
        x, weight = (np.asarray(inputs[n], np.float64) for n in ("x", "weight"))
        if x.size == 0:
            return (np.zeros(x.shape),)
        eps = kernel_eps(plan.kernel, self.scalars["eps"])
        mean = fsum_rows(x * x) / x.shape[1]
        return (x / np.sqrt(mean + eps)[:, None] * weight,)

    def plans(self, backend: str, shape: tuple[int, ...], dtype: str, exhaustive: bool = False) -> list[Plan]:
        """The op's own CTA size for the shape and the family's others (every size when exhaustive). Mixed keys
        (bf16-f32) check the mixed-precision instances."""
        storage, param = split_key(dtype)
        sizes = self.blocks["every" if exhaustive else backend]
        blocks = dict.fromkeys((forward.default_block(shape[1]), *sizes))  # ordered, without repeats
        return [forward.kernel_plan(shape, storage, param, b) for b in blocks]  # type: ignore[arg-type]

    def tolerances(
        self, plan: Plan, shape: tuple[int, ...], inputs: dict[str, np.ndarray], ref: tuple[np.ndarray, ...]
    ) -> list[np.ndarray]:
        dtype = plan.kernel.dtype
        info = DTYPES[dtype]
        u, us = info.unit_roundoff, info.storage_roundoff
        kernel = relative_error(u, summation_depth(plan, shape[1]))
        reference = relative_error(U64, 1)
        y = np.abs(ref[0]) / (1 - reference)  # bounds |y| of the exact result
        return [(us + (1 + us) * kernel + reference) * y + floor(dtype)]


FAMILIES = (Forward(),)
