"""The RMSNorm forward op's benchmark: bytes moved and the baselines a user would pick instead."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from rust_kernels import ops
from rust_kernels.bench.baselines import Baseline, register
from rust_kernels.dtypes import DTYPES
from rust_kernels.families.rms_norm.verify import split_key

EPS = 1e-6


class Forward(Baseline):
    family = "rms_norm_forward"
    # LLM hidden sizes: many tokens of 1024 to 12288 features, and a decode-sized batch of 16 rows.
    bench_shapes = [(4096, 1024), (8192, 4096), (2048, 12288), (16, 768)]  # noqa: RUF012

    def moved_bytes(self, shape: tuple[int, ...], dtype: str) -> int:
        """Read x, write y (in the activations' dtype) and read weight once (in its own)."""
        activations, parameters = split_key(dtype)
        return 2 * math.prod(shape) * DTYPES[activations].size + shape[1] * DTYPES[parameters].size

    def bench_calls(self, tensors: dict[str, Any]) -> dict[str, Callable[[], Any]]:
        import torch

        x, weight = tensors["x"], tensors["weight"]
        cols = x.shape[-1]
        y = torch.empty_like(x)

        acc = torch.float64 if x.dtype == torch.float64 else torch.float32  # the kernels' accumulation type

        def maths(x: Any, weight: Any) -> Any:
            xa = x.to(acc)
            return (xa * torch.rsqrt(xa.square().mean(-1, keepdim=True) + EPS) * weight.to(acc)).to(x.dtype)

        compiled = torch.compile(maths, dynamic=False)
        op = ops.rms_norm_forward
        return {
            "ours": lambda: op(x, weight, eps=EPS),
            "torch": lambda: torch.nn.functional.rms_norm(x, (cols,), weight, EPS),
            "compile": lambda: compiled(x, weight),
            "bound": lambda: torch.neg(x, out=y),  # reads x, writes y: the same bytes but weight's
        }


register(Forward())
