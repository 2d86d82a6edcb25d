"""Cross-check every catalogue kernel against its NumPy reference over a suite of shapes, on the GPU or the host.

Tolerances are error bounds derived from the arithmetic, never tuned: with u the unit roundoff of the kernel's
accumulation type and u64 = 2^-53 that of the float64 reference,
- dx = weight * rstd * dy takes 5 roundings (add, sqrt, divide for rstd; two products) plus the store:
  |err| <= 6u |dx| (+ 3 u64 |dx| for the reference);
- a sum of n terms accumulated along a tree of depth d errs by at most gamma_d * sum|terms|, gamma_d = d u / (1 - d u)
  (Higham, Accuracy and Stability, 4.2). Each thread adds B * ceil(HW / BLOCK_HW) terms in sequence, then 5 butterfly
  levels within a warp and 5 over the warps: d = B * ceil(HW / BLOCK_HW) + 10.
  dbias: gamma_d * sum|dy|.  dweight: its terms dy * (x - mean) carry 2 roundings each, and the final product with
  rstd 4 more: rstd * gamma_(d+2) * sum|dy (x - mean)| + 5u |dweight|.
The reference sums with math.fsum, so its own error is the rounding of each float64 term, added to the bounds.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import numpy as np

from rust_kernels import arrays, ops, reference
from rust_kernels.kernels import instances
from rust_kernels.spec import DTYPES

GPU_SUITE = [(2, 3, 5, 7), (4, 8, 17, 19), (16, 8, 1, 1), (1, 16, 32, 32), (8, 1, 28, 28), (2, 4, 256, 256),
             (32, 64, 28, 28), (3, 5, 1, 1031)]  # fmt: skip
HOST_SUITE = [(2, 3, 5, 7), (4, 8, 17, 19), (16, 8, 1, 1), (1, 4, 32, 32), (8, 1, 28, 28), (1, 2, 128, 128)]
BLOCKS = (32, 256, 1024)
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
    np_dtype = DTYPES[dtype].numpy
    dy = rng.standard_normal(shape).astype(np_dtype)
    x = rng.standard_normal(shape).astype(np_dtype) * 2 + 0.5
    weight = rng.uniform(0.5, 1.5, channels).astype(np_dtype)
    mean = rng.standard_normal(channels).astype(np_dtype) * 0.5
    var = rng.uniform(0.5, 2.0, channels).astype(np_dtype)
    return dy, x.astype(np_dtype), weight, mean, var


def tolerances(dtype: str, block: int, data: tuple[np.ndarray, ...], ref: tuple[np.ndarray, ...]) -> list[np.ndarray]:
    dy, x, _, mean, var = (np.asarray(a, np.float64) for a in data)
    u = DTYPES[dtype].unit_roundoff
    tiny = float(np.finfo(DTYPES[dtype].numpy).tiny) * 4
    batches, _, height, width = dy.shape
    depth = batches * math.ceil(height * width / block) + 10

    def gamma(n: int) -> float:
        return n * u / (1 - n * u)

    rstd = 1 / np.sqrt(var + float(np.float32(EPS)))
    abs_dy = np.abs(dy).sum(axis=(0, 2, 3))
    abs_terms = np.abs(dy * (x - mean[:, None, None])).sum(axis=(0, 2, 3))
    dx, dweight, _ = ref
    return [
        (6 * u + 3 * U64) * np.abs(dx) + tiny,
        rstd * (gamma(depth + 2) + 4 * U64) * abs_terms + 5 * u * np.abs(dweight) + tiny,
        (gamma(depth) + 2 * U64) * abs_dy + tiny,
    ]


def check_one(kernel_block: int, dtype: str, shape: tuple[int, int, int, int], backend: str) -> Result:
    data = inputs(shape, dtype)
    ref = reference.batch_norm_2d_nchw_backward(*data, eps=EPS)
    args = data if backend == "host" else tuple(arrays.to_device(a) for a in data)
    got = ops.batch_norm_2d_nchw_backward(*args, eps=EPS, block_hw=kernel_block, backend=backend)
    got = [arrays.to_host(a).astype(np.float64) for a in got]
    worst, tol_at, max_abs, max_rel = 0.0, 0.0, 0.0, 0.0
    for out, want, tol in zip(got, ref, tolerances(dtype, kernel_block, data, ref), strict=True):
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
    kernel_id = f"batch_norm_2d_nchw_backward__{dtype}__{kernel_block}"
    return Result(kernel_id, shape, max_abs, max_rel, worst, tol_at)


def run(backend: str, shapes: list[tuple[int, int, int, int]] | None = None, out=sys.stdout) -> list[Result]:
    """Checks every catalogue kernel, dtype and block size in BLOCKS over the suite; prints a table."""
    shapes = shapes or (HOST_SUITE if backend == "host" else GPU_SUITE)
    header = f"{'kernel':<42} {'shape (B,C,H,W)':<20} {'max abs err':>12} {'max rel err':>12} {'tolerance':>11} "
    print(header + f"{'err/tol':>8}  result", file=out)
    results = []
    for kernel in instances():
        if kernel.block_dim[0] not in BLOCKS:
            continue
        for shape in shapes:
            r = check_one(kernel.block_dim[0], kernel.dtype, shape, backend)
            results.append(r)
            print(
                f"{r.kernel_id:<42} {shape!s:<20} {r.max_abs:>12.3e} {r.max_rel:>12.3e} {r.tolerance:>11.3e} "
                f"{r.worst:>8.3f}  {'PASS' if r.passed else 'FAIL'}",
                file=out,
                flush=True,
            )
    failed = sum(not r.passed for r in results)
    print(f"{backend}: {len(results) - failed} passed, {failed} failed", file=out)
    return results
