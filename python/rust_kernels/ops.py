"""The public ops of the registry, e.g. `rust_kernels.ops.batch_norm_2d_nchw_backward(...)`: functions generated from
the ops' declarations (rust_kernels.runtime) that check their arguments, allocate, choose a launch plan and launch
it. `backend="cuda"` takes PyTorch or CuPy CUDA arrays and returns arrays of the same library (asynchronously, on
the arrays' current stream unless `stream=` says otherwise); `backend="host"` takes NumPy arrays and runs the CPU
emulator."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rust_kernels import registry


def __getattr__(name: str) -> Callable[..., Any]:
    return registry.op(name)


def __dir__() -> list[str]:
    return sorted(op.name for op in registry.ops())
