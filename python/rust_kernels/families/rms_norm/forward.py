"""RMSNorm forward over a 2-D [rows, cols] x, per row: its argument checks, launch plan and op declaration.

Plan. One CTA per row (rms_norm_forward), its threads striding over the columns: about four columns per thread,
from 32 to 1024 threads (BLOCK a power of two), so short rows leave few threads idle and long ones keep every
thread streaming.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from rust_kernels import arrays
from rust_kernels.dtypes import DTYPES
from rust_kernels.errors import ArgumentError
from rust_kernels.kernels import RmsNormForward  # type: ignore[attr-defined]
from rust_kernels.launch import check_backend
from rust_kernels.runtime import Input, Op, Output, Placement, Plan, Problem, Scalar

MIN_BLOCK, MAX_BLOCK = 32, 1024
COLS_PER_THREAD = 4
MAX_ELEMENTS = 2**31  # rows * cols must stay below it: the kernel's i32 arguments
KERNELS = (RmsNormForward,)


def default_block(cols: int) -> int:
    """The smallest power of two >= cols / COLS_PER_THREAD, clamped to [MIN_BLOCK, MAX_BLOCK]."""
    wanted = max(1, -(-cols // COLS_PER_THREAD))
    return min(MAX_BLOCK, max(MIN_BLOCK, 1 << (wanted - 1).bit_length()))


def kernel_plan(shape: tuple[int, int], dtype: str, param: str, block: int) -> Plan:
    """The kernel with `block` threads per CTA, a CTA per row."""
    return Plan(RmsNormForward(block, dtype=dtype, param_dtype=param), (shape[0], 1, 1))


@cache  # a pure function of its arguments: the op asks it on every call it decides
def plan(shape: tuple[int, int], dtype: str, param: str, alignment: int, sms: int, block: int | None = None) -> Plan:
    """The plan for a [rows, cols] problem; `block` fixes the CTA size (else default_block). The kernel loads one
    element at a time, so the pointers' `alignment` and the SMs do not change it."""
    return kernel_plan(shape, dtype, param, default_block(shape[1]) if block is None else block)


def choose(problem: Problem, placement: Placement) -> Plan:
    return plan(problem.shape, problem.dtype, problem.param, placement.alignment, placement.sms,  # type: ignore[arg-type]
                problem.scalars.get("block"))  # fmt: skip


# --- argument checks --------------------------------------------------------------------------------------------------
def check_eps(eps: object) -> float:
    if isinstance(eps, bool) or not isinstance(eps, int | float | np.floating | np.integer) or not eps >= 0:
        raise ArgumentError(f"eps: expected a non-negative number, got {eps!r}")
    return float(eps)


def check_block(block: object) -> int | None:
    """None (the plan's choice) or an int; whether the kernel has that CTA size is checked when the plan is made."""
    if block is not None and (isinstance(block, bool) or not isinstance(block, int | np.integer)):
        raise ArgumentError(f"block: expected None or an int (a power of two from {MIN_BLOCK} to {MAX_BLOCK}), "
                            f"got {block!r}")  # fmt: skip
    if block is not None and not (MIN_BLOCK <= block <= MAX_BLOCK and block & (block - 1) == 0):
        raise ArgumentError(f"block: expected a power of two from {MIN_BLOCK} to {MAX_BLOCK}, got {block!r}")
    return None if block is None else int(block)


def param_dtypes(dtype: str) -> set[str]:
    """The weight dtypes x's dtype takes: its own, or f32 beside bf16/f16 (torch.autocast's pairing)."""
    return {dtype, "f32"} if DTYPES[dtype].acc == "f32" and dtype != "f32" else {dtype}


def describe(named: dict[str, Any], scalars: dict[str, Any], backend: str) -> Problem:
    """x [rows, cols] of a float dtype, weight [cols] of x's dtype (or f32 beside bf16/f16); the kernel arguments
    ROWS, COLS and eps. Reads only shapes and dtypes (fake tensors trace it too)."""
    check_backend(backend)
    x, weight = named["x"], named["weight"]
    shape = tuple(int(d) for d in x.shape)
    if len(shape) != 2:
        raise ArgumentError(f"x: expected a 2-D [rows, cols] array, got shape {shape}")
    rows, cols = shape
    if tuple(int(d) for d in weight.shape) != (cols,):
        raise ArgumentError(f"weight: expected shape {(cols,)} (x's columns), got {tuple(weight.shape)}")
    dtype = arrays.dtype_name(x)
    if dtype not in DTYPES:
        raise ArgumentError(f"x: expected a floating dtype among {sorted(DTYPES)}, got {dtype}")
    param = arrays.dtype_name(weight)
    allowed = param_dtypes(dtype)
    if param not in allowed:
        raise ArgumentError(f"weight: expected dtype {' or '.join(sorted(allowed))} with x in {dtype}, got {param}")
    if rows * cols >= MAX_ELEMENTS:
        raise ArgumentError(f"x: rows * cols = {rows * cols} exceeds the kernel's 32-bit indexing (< 2**31)")
    values = {"ROWS": rows, "COLS": cols, "eps": scalars["eps"]}
    return Problem((rows, cols), dtype, param, values, scalars)


# --- the op -----------------------------------------------------------------------------------------------------------
EPS = Scalar("eps", 1e-6, check_eps, "float")
BLOCK = Scalar("block", None, check_block, "int?")

RMS_NORM = Op(
    name="rms_norm_forward",
    doc="""y = x * rsqrt(mean(x^2 over the last dimension) + eps) * weight for a 2-D [rows, cols] `x` and a [cols]
    `weight`, as torch.nn.functional.rms_norm(x, (cols,), weight, eps). weight shares x's dtype, or is f32 with
    bf16/f16 x (torch.autocast's pairing); y has x's. The sum of squares is accumulated in f32 (f64 for f64) in a
    fixed order: results are bit-identical run to run. `block` fixes the CTA size (a power of two, 32 to 1024).
    Empty x gives an empty y. Launches go to `stream`, by default the current stream of the arrays' library.""",
    inputs=(Input("x"), Input("weight")),
    scalars=(EPS, BLOCK),
    outputs=(Output("y", like="x"),),
    describe=describe,
    choose=choose,
    kernels=KERNELS,
    aligned=(),  # the kernel loads one element at a time: its plan does not depend on the addresses
    torch=True,
)

OPS = (RMS_NORM,)
