"""Ops: shape-checked, allocating wrappers that pick a launch plan (rust_kernels.plan) and launch it.

`backend="cuda"` takes PyTorch or CuPy CUDA arrays and returns arrays of the same library (asynchronously, on
`stream`); `backend="host"` takes NumPy arrays and runs the CPU emulator."""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from rust_kernels import arrays
from rust_kernels import plan as plans
from rust_kernels.errors import ArgumentError
from rust_kernels.kernels import Kernel
from rust_kernels.launch import load

# Split-kernel workspaces, per (library, device, stream, dtype, mode): every launch leaves them zeroed again, and
# launches on one stream are ordered, so one workspace per stream is never used by two launches at once.
_workspaces: dict[tuple, tuple[Any, Any]] = {}


@cache
def _loaded(kernel: Kernel, device: int, backend: str) -> Any:
    return load(kernel, device=device, backend=backend)


def _expect_shape(name: str, a: Any, shape: tuple[int, ...]) -> None:
    if tuple(a.shape) != shape:
        raise ArgumentError(f"{name}: expected shape {shape}, got {tuple(a.shape)}")


def _workspace(like: Any, plan: plans.Plan, channels: int, device: int, stream: Any) -> tuple[Any, Any]:
    """(partials, counters) for a split launch: zero before the launch, and zero after it."""
    acc = plan.kernel.dtype_info.acc
    deterministic = plan.kernel.deterministic == 1
    need = channels * (plan.split if deterministic else 1) * 2
    if isinstance(like, arrays.np.ndarray):  # host: fresh and cheap
        return arrays.zeros(like, need, acc), arrays.zeros(like, channels, "u32")
    from rust_kernels.cuda import stream_handle

    key = (type(like).__module__, device, stream_handle(stream), acc, deterministic)
    held = _workspaces.get(key)
    if held is None or held[0].shape[0] < need or held[1].shape[0] < channels:
        held = (arrays.zeros(like, need, acc), arrays.zeros(like, channels, "u32"))
        _workspaces[key] = held
    return held


def batch_norm_2d_nchw_backward(
    dy: Any,
    x: Any,
    weight: Any,
    running_mean: Any,
    running_var: Any,
    eps: float = 1e-5,
    block_hw: int | None = None,
    backend: str = "cuda",
    stream: Any = None,
    deterministic: bool = True,
    plan: plans.Plan | None = None,
) -> tuple[Any, Any, Any]:
    """(dx, dweight, dbias) of BatchNorm2d over NCHW `x` with frozen running statistics.

    The launch plan is chosen per shape (`block_hw` fixes its CTA size). The CTAs sharing a channel combine their
    partial sums in a fixed order, so results are bit-identical run to run; `deterministic=False` combines them with
    float atomics instead (measured no faster on the H200: see the README). `plan` overrides the choice."""
    if len(getattr(x, "shape", ())) != 4:
        raise ArgumentError(f"x: expected an NCHW array (4 dimensions), got shape {getattr(x, 'shape', None)}")
    shape = tuple(map(int, x.shape))
    batches, channels, height, width = shape
    _expect_shape("dy", dy, shape)
    for name, a in (("weight", weight), ("running_mean", running_mean), ("running_var", running_var)):
        _expect_shape(name, a, (channels,))
    dtype = arrays.dtype_name(x)
    for name, a in (("dy", dy), ("weight", weight), ("running_mean", running_mean), ("running_var", running_var)):
        if arrays.dtype_name(a) != dtype:
            raise ArgumentError(f"{name}: expected dtype {dtype} like x, got {arrays.dtype_name(a)}")
    device = 0 if backend == "host" else arrays.device_of(x)
    dx, dweight, dbias = (arrays.empty(x, s) for s in (shape, (channels,), (channels,)))
    if plan is None:
        from rust_kernels.cuda import multiprocessor_count

        alignment = math.gcd(16, *(arrays.address(a) for a in (dy, x, dx)))
        sms = 1 if backend == "host" else multiprocessor_count(device)
        plan = plans.choose(shape, dtype, alignment, sms, deterministic, block_hw)
    if channels == 0:
        return dx, dweight, dbias
    head = (dy, x, dx, weight, running_mean, running_var, dweight, dbias)
    tail = (batches, channels, height * width, eps)
    if plan.kind == "split":
        args = (*head, *_workspace(x, plan, channels, device, stream), *tail, plan.split)
    elif plan.kind == "warp":
        args = (*head, *tail, plan.ctas)
    else:
        args = (*head, *tail)
    kernel = plan.kernel
    _loaded(kernel, device, backend).launch(plan.grid(channels), kernel.block_dim, args, stream=stream)
    return dx, dweight, dbias
