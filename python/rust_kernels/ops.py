"""Ops: shape-checked, allocating wrappers that pick a kernel instance and launch it.

`backend="cuda"` takes PyTorch or CuPy CUDA arrays and returns arrays of the same library (asynchronously, on
`stream`); `backend="host"` takes NumPy arrays and runs the CPU emulator."""

from __future__ import annotations

from functools import cache
from typing import Any

from rust_kernels import arrays
from rust_kernels.errors import ArgumentError
from rust_kernels.kernels import BatchNorm2dNchwBackward, Kernel  # type: ignore[attr-defined]
from rust_kernels.launch import load


@cache
def _loaded(kernel: Kernel, device: int, backend: str) -> Any:
    return load(kernel, device=device, backend=backend)


def _expect_shape(name: str, a: Any, shape: tuple[int, ...]) -> None:
    if tuple(a.shape) != shape:
        raise ArgumentError(f"{name}: expected shape {shape}, got {tuple(a.shape)}")


def batch_norm_2d_nchw_backward(
    dy: Any,
    x: Any,
    weight: Any,
    running_mean: Any,
    running_var: Any,
    eps: float = 1e-5,
    block_hw: int = 256,
    backend: str = "cuda",
    stream: Any = None,
) -> tuple[Any, Any, Any]:
    """(dx, dweight, dbias) of BatchNorm2d over NCHW `x` with frozen running statistics."""
    if len(getattr(x, "shape", ())) != 4:
        raise ArgumentError(f"x: expected an NCHW array (4 dimensions), got shape {getattr(x, 'shape', None)}")
    batches, channels, height, width = map(int, x.shape)
    _expect_shape("dy", dy, tuple(x.shape))
    for name, a in (("weight", weight), ("running_mean", running_mean), ("running_var", running_var)):
        _expect_shape(name, a, (channels,))
    dtype = arrays.dtype_name(x)
    for name, a in (("dy", dy), ("weight", weight), ("running_mean", running_mean), ("running_var", running_var)):
        if arrays.dtype_name(a) != dtype:
            raise ArgumentError(f"{name}: expected dtype {dtype} like x, got {arrays.dtype_name(a)}")
    kernel = BatchNorm2dNchwBackward(block_hw=block_hw, dtype=dtype)
    device = 0 if backend == "host" else arrays.device_of(x)
    dx, dweight, dbias = (arrays.empty(x, s) for s in (tuple(x.shape), (channels,), (channels,)))
    if channels == 0:
        return dx, dweight, dbias
    args = (dy, x, dx, weight, running_mean, running_var, dweight, dbias, batches, channels, height * width, eps)
    _loaded(kernel, device, backend).launch((channels,), kernel.block_dim, args, stream=stream)
    return dx, dweight, dbias
