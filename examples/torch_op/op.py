"""A user's kernel as a PyTorch operator, from a declaration alone (rust_kernels.runtime.Op): the spec and template
in this directory, the op's checks and plan here. `rust_kernels.torch.define(OP)` makes it
torch.ops.rust_kernels.scale, with CUDA and CPU (emulator) kernels and a fake for torch.compile.

    python examples/torch_op/op.py        # opcheck on CPU tensors, and the values against alpha * x
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import rust_kernels
from rust_kernels import ArgumentError, registry
from rust_kernels.runtime import Input, Op, Output, Placement, Plan, Problem, Scalar

PROGRAM = rust_kernels.Program(Path(__file__).resolve().parent)
SCALE = PROGRAM["scale"]
BLOCK = 256


def check_alpha(alpha: object) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, int | float):
        raise ArgumentError(f"alpha: expected a number, got {alpha!r}")
    return float(alpha)


def describe(arrays: dict[str, Any], scalars: dict[str, Any], backend: str) -> Problem:
    x = arrays["x"]
    dtype = rust_kernels.arrays.dtype_name(x)
    if dtype not in SCALE.spec.dtypes:
        raise ArgumentError(f"x: expected a dtype among {list(SCALE.spec.dtypes)}, got {dtype}")
    size = math.prod(x.shape)
    if size >= 2**32:
        raise ArgumentError(f"x: {size} elements exceed the kernel's 32-bit count")
    return Problem(tuple(x.shape), dtype, dtype, {"N": size, "alpha": scalars["alpha"]}, scalars)


def choose(problem: Problem, placement: Placement) -> Plan:
    ctas = max(1, min(-(-math.prod(problem.shape) // BLOCK), placement.sms * 8))
    return Plan(SCALE(BLOCK, dtype=problem.dtype), (ctas, 1, 1), (("CTAS", ctas),))


OP = Op(
    name="scale",
    doc="y = alpha * x (any shape, contiguous), on the GPU or in the emulator.",
    inputs=(Input("x"),),
    scalars=(Scalar("alpha", 1.0, check_alpha, "float"),),
    outputs=(Output("y", like="x"),),
    describe=describe,
    choose=choose,
    kernels=(SCALE,),
    torch=True,
)
if OP.name not in {op.name for op in registry.ops()}:
    registry.register(OP)


def main() -> int:
    import torch

    import rust_kernels.torch as rk_torch

    rk_torch.define(OP)
    x = torch.randn(3, 5, 7)
    torch.library.opcheck(torch.ops.rust_kernels.scale.default, (x, 2.5))
    y = torch.ops.rust_kernels.scale(x, 2.5)
    assert torch.equal(y, x * 2.5), "scale: values differ from alpha * x"
    print("torch.ops.rust_kernels.scale: opcheck passed; equal to alpha * x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
