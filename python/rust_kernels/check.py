"""Cross-check every catalogue kernel against its NumPy reference over a suite of shapes, on the GPU or the host.

Tolerances are error bounds derived from the arithmetic, never tuned. With u the unit roundoff of the kernel's
accumulation type (f32 for f32, bf16 and f16 storage; f64 for f64) and u64 = 2^-53 that of the float64 reference:
- dx = weight * rstd * dy: 5 roundings in the kernel (add, sqrt and divide for rstd; two products), bounded with
  second-order terms by 6u |dx|; 5 in the reference, bounded by 6 u64 |dx|.
- Sums: n terms added along a tree of depth d err by at most gamma_d * sum|terms|, gamma_d = d u / (1 - d u)
  (Higham, Accuracy and Stability, 4.2); summation_depth gives d for each plan (for the seed kernel each thread adds
  B * ceil(HW / BLOCK_HW) terms in sequence, then 5 butterfly levels within a warp and 5 over the warps).
  dbias: gamma_d * sum|dy|. dweight: its terms dy * (x - mean) carry 2 roundings each (gamma_(d+2)), and the final
  product with rstd (itself 3 roundings) 4 more: (1 + 5u) rstd gamma_(d+2) sum|dy (x - mean)| + 5u |dweight|.
  The reference sums with math.fsum (one rounding), so its error is its terms' roundings: 3 u64 rstd sum|terms| +
  6 u64 |dweight| and 2 u64 sum|dy|.
- Storage: bf16 and f16 results are rounded from the f32 value ŷ once more: |fl(ŷ) - y| <= us |y| + (1 + us) |ŷ - y|,
  us = 2^-8 (bf16) or 2^-11 (f16); f32 and f64 results are stored as computed (us = 0). Inputs are generated in the
  storage format, so the reference sees exactly the kernel's inputs.
- An absolute floor covers underflow in the accumulation type and rounding to a subnormal of the storage type.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from rust_kernels import arrays, ops, reference
from rust_kernels.errors import RustKernelsError
from rust_kernels.kernels import instances
from rust_kernels.plan import Plan, unit_elements, warp
from rust_kernels.spec import DTYPES

GPU_SUITE = [(2, 3, 5, 7), (4, 8, 17, 19), (16, 8, 1, 1), (1, 16, 32, 32), (8, 1, 28, 28), (2, 4, 256, 256),
             (32, 64, 28, 28), (3, 5, 1, 1031), (3, 4, 6, 7), (4, 16, 14, 14)]  # fmt: skip
HOST_SUITE = [(2, 3, 5, 7), (4, 8, 17, 19), (16, 8, 1, 1), (1, 4, 32, 32), (8, 1, 28, 28), (1, 2, 128, 128),
              (2, 3, 6, 7), (2, 5, 14, 14)]  # fmt: skip
SEED_BLOCKS = (32, 256, 1024)
VARIANT_BLOCKS = {"cuda": (128, 512), "host": (128,)}
SPLITS = {"cuda": (1, 3, 16), "host": (1, 3)}
EPS = 1e-5
U64 = 2.0**-53


@dataclass(frozen=True)
class Result:
    kernel_id: str
    shape: tuple[int, int, int, int]
    max_abs: float  # largest |kernel - reference| over dx, dweight, dbias
    max_rel: float  # largest max|err| / max|reference| over the three outputs
    worst: float  # largest err / tolerance over all elements: PASS iff <= 1
    tolerance: float  # the tolerance at that element

    @property
    def passed(self) -> bool:
        return self.worst <= 1.0


def inputs(shape: tuple[int, int, int, int], dtype: str, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    channels = shape[1]
    dy = rng.standard_normal(shape)
    x = rng.standard_normal(shape) * 2 + 0.5
    weight = rng.uniform(0.5, 1.5, channels)
    mean = rng.standard_normal(channels) * 0.5
    var = rng.uniform(0.5, 2.0, channels)
    # Rounded to the storage type here, so the reference sees exactly what the kernel reads.
    return tuple(a.astype(DTYPES[dtype].numpy_dtype()) for a in (dy, x, weight, mean, var))


@lru_cache(maxsize=4)
def _case(shape: tuple[int, int, int, int], dtype: str) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """Inputs and reference for one shape and dtype, shared by every plan checked on them."""
    data = inputs(shape, dtype)
    return data, reference.batch_norm_2d_nchw_backward(*data, eps=EPS)


def summation_depth(plan: Plan, shape: tuple[int, int, int, int]) -> int:
    """The longest chain of additions behind a channel sum: each thread's sequential terms, 5 butterfly levels
    within a warp and 5 over the warps; for a split plan also the partials (one per CTA of the channel, added in a
    chain by float atomics in the worst case) and a second 10-level block reduction."""
    batches, _, height, width = shape
    block = plan.kernel.block_dim[0]
    if plan.kind == "seed":
        return batches * math.ceil(height * width / block) + 10
    if plan.kind == "warp":  # each lane walks the channel with a stride of 32, then 5 butterfly levels
        return math.ceil(batches * height * width / 32) + 16 + 5
    elements = math.ceil(batches * height * width / plan.split)
    per_thread = math.ceil(elements / block) + 16  # + one pack's lanes, where a slice ends inside a stride
    return per_thread + 10 + plan.split + 10


def tolerances(dtype: str, depth: int, data: tuple[np.ndarray, ...], ref: tuple[np.ndarray, ...]) -> list[np.ndarray]:
    dy, x, _, mean, var = (np.asarray(a, np.float64) for a in data)
    u, us = DTYPES[dtype].unit_roundoff, DTYPES[dtype].storage_roundoff
    # Absolute floor: underflow in the accumulation type, and an output rounding to a subnormal of the storage type.
    tiny = float(np.finfo(DTYPES[dtype].acc_numpy).tiny) * 4 + DTYPES[dtype].smallest_subnormal

    def gamma(n: int) -> float:
        return n * u / (1 - n * u)

    rstd = 1 / np.sqrt(var + float(np.float32(EPS)))
    abs_dy = np.abs(dy).sum(axis=(0, 2, 3))
    abs_terms = np.abs(dy * (x - mean[:, None, None])).sum(axis=(0, 2, 3))
    dx, dweight, dbias = (np.abs(r) for r in ref)
    kernel = [
        6 * u * dx,
        (1 + 5 * u) * rstd * gamma(depth + 2) * abs_terms + 5 * u * dweight,
        gamma(depth) * abs_dy,
    ]
    reference = [6 * U64 * dx, 3 * U64 * rstd * abs_terms + 6 * U64 * dweight, 2 * U64 * abs_dy]
    return [(1 + us) * k + us * r + e + tiny for k, r, e in zip(kernel, (dx, dweight, dbias), reference, strict=True)]


def check_one(plan: Plan, shape: tuple[int, int, int, int], backend: str) -> Result:
    """Runs the op with `plan` on seeded random data and compares all three outputs with the reference."""
    dtype = plan.kernel.dtype
    data, ref = _case(shape, dtype)
    args = data if backend == "host" else tuple(arrays.to_device(a) for a in data)
    got = ops.batch_norm_2d_nchw_backward(*args, eps=EPS, backend=backend, plan=plan)
    got = [arrays.to_host(a).astype(np.float64) for a in got]
    worst, tol_at, max_abs, max_rel = 0.0, 0.0, 0.0, 0.0
    for out, want, tol in zip(got, ref, tolerances(dtype, summation_depth(plan, shape), data, ref), strict=True):
        if out.size == 0:
            continue
        err = np.abs(out - want)
        err[~np.isfinite(out)] = np.inf
        ratio = err / tol
        at = int(np.argmax(ratio))
        if ratio.flat[at] > worst:
            worst, tol_at = float(ratio.flat[at]), float(tol.flat[at])
        max_abs = max(max_abs, float(err.max()))
        max_rel = max(max_rel, float(err.max() / max(np.abs(want).max(), np.finfo(np.float64).tiny)))
    return Result(label(plan), shape, max_abs, max_rel, worst, tol_at)


def label(plan: Plan) -> str:
    return plan.kernel.id + {"split": f" split={plan.split}", "warp": f" ctas={plan.ctas}"}.get(plan.kind, "")


def plans_for(backend: str, shape: tuple[int, int, int, int]) -> list[Plan]:
    """Every catalogue kernel instance worth checking on `shape`: the seed kernel at three CTA sizes; the split
    kernel in each mode with and without splitting; the warp kernel with a warp per channel and with one CTA
    striding over all channels (vectorized variants only where their packs divide H*W)."""
    out = []
    for kernel in instances():
        plan = Plan(kernel)
        if plan.kind == "seed":
            if kernel.block_hw in SEED_BLOCKS:
                out.append(plan)
            continue
        if kernel.block_hw not in VARIANT_BLOCKS[backend]:
            continue
        if (shape[2] * shape[3]) % unit_elements(kernel.vectorized, kernel.dtype):
            continue  # its packs do not divide a row
        if plan.kind == "split":
            out += [Plan(kernel, split) for split in SPLITS[backend]]
        else:
            out += [warp(shape[1], kernel.block_hw, kernel.vectorized, kernel.dtype), Plan(kernel, ctas=1)]
    return out


def run(backend: str, shapes: list[tuple[int, int, int, int]] | None = None, out=sys.stdout) -> list[Result]:
    """Checks every catalogue kernel and dtype over the suite; prints a table and returns the results."""
    shapes = shapes or (HOST_SUITE if backend == "host" else GPU_SUITE)
    width = 72
    print(f"{'kernel (plan)':<{width}} {'shape (B,C,H,W)':<20} {'max abs err':>12} {'max rel err':>12} "
          f"{'tolerance':>11} {'err/tol':>8}  result", file=out)  # fmt: skip
    results = []
    for shape in shapes:
        for plan in plans_for(backend, shape):
            try:
                r = check_one(plan, shape, backend)
            except RustKernelsError as err:  # a failed launch is a failed check, reported with its reason
                r = Result(label(plan), shape, math.inf, math.inf, math.inf, 0.0)
                print(f"{r.kernel_id:<{width}} {shape!s:<20} FAIL: {err}", file=out, flush=True)
                results.append(r)
                continue
            results.append(r)
            print(
                f"{r.kernel_id:<{width}} {shape!s:<20} {r.max_abs:>12.3e} {r.max_rel:>12.3e} {r.tolerance:>11.3e} "
                f"{r.worst:>8.3f}  {'PASS' if r.passed else 'FAIL'}",
                file=out,
                flush=True,
            )
    failed = sum(not r.passed for r in results)
    print(f"{backend}: {len(results) - failed} passed, {failed} failed", file=out)
    return results
