"""The few things the ops need from array libraries: dtype, shape, device, allocation, transfer. PyTorch and CuPy
arrays are used as they are (both share the primary context); NumPy arrays serve the host backend."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Any

import numpy as np

from rust_kernels.dtypes import DTYPES, TYPES, name_of, torch_dtype
from rust_kernels.errors import ArgumentError, ArgumentTypeError


def is_torch(a: Any) -> bool:
    return type(a).__module__.startswith("torch")


def dtype_name(a: Any) -> str:
    """Our name ("f32", "bf16", ...) for the dtype of an array of any supported library, else its own name."""
    return name_of(a.dtype)


def device_of(a: Any) -> int:
    """The CUDA device ordinal of a device array."""
    if is_torch(a):
        if a.device.type != "cuda":
            raise ArgumentError(f"expected a CUDA tensor, got one on {a.device}")
        return a.device.index
    device = getattr(a, "device", None)
    if device is not None and hasattr(device, "id"):  # CuPy
        return int(device.id)
    raise ArgumentTypeError(f"expected a PyTorch or CuPy CUDA array, got {type(a).__name__}")


def is_contiguous(a: Any) -> bool:
    """Whether an array of any supported library is C-contiguous."""
    if is_torch(a):
        return bool(a.is_contiguous())
    return bool(a.flags.c_contiguous)


def device_name(a: Any) -> str:
    """Where an array lives, as PyTorch names devices: "cpu" (NumPy), "cuda:N", "meta", ..."""
    if isinstance(a, np.ndarray):
        return "cpu"
    if is_torch(a):
        return str(a.device)
    device = getattr(a, "device", None)
    return f"cuda:{device.id}" if hasattr(device, "id") else type(a).__name__


def empty_like(like: Any, dtype: str | None = None) -> Any:
    """An uninitialised array of `like`'s library, shape, device and memory layout (a channels_last tensor gives a
    channels_last one, a permuted NumPy array one in its order), in `dtype` (our name) or like's."""
    if isinstance(like, np.ndarray):
        return np.empty_like(like, dtype=None if dtype is None else DTYPES[dtype].numpy_dtype())
    if is_torch(like):
        import torch

        return torch.empty_like(like, dtype=None if dtype is None else torch_dtype(dtype))
    import cupy

    with cupy.cuda.Device(device_of(like)):
        return cupy.empty_like(like, dtype=None if dtype is None else DTYPES[dtype].numpy_dtype())


def empty(like: Any, shape: tuple[int, ...], dtype: str | None = None) -> Any:
    """An uninitialised C-contiguous array of `like`'s library and device, in `dtype` (our name) or like's."""
    if isinstance(like, np.ndarray):
        return np.empty(shape, like.dtype if dtype is None else DTYPES[dtype].numpy_dtype())
    if is_torch(like):
        return like.new_empty(shape, dtype=None if dtype is None else torch_dtype(dtype))
    import cupy

    with cupy.cuda.Device(device_of(like)):
        return cupy.empty(shape, like.dtype if dtype is None else DTYPES[dtype].numpy_dtype())


def copy(a: Any) -> Any:
    """A copy of an array of any supported library, in its memory layout."""
    return a.clone() if is_torch(a) else a.copy(order="K") if isinstance(a, np.ndarray) else a.copy()


def permuted(a: Any, order: tuple[int, ...]) -> Any:
    """The view of `a` with its dimensions in `order` (for a channels_last array, (0, 2, 3, 1): C-contiguous)."""
    return a.permute(*order) if is_torch(a) else a.transpose(order)


def contiguous_in(a: Any, order: tuple[int, ...]) -> bool:
    """Whether the view of `a` with its dimensions in `order` is C-contiguous (extents of 1 and empty arrays, whose
    strides mean nothing, pass)."""
    shape = tuple(a.shape)
    if 0 in shape:
        return True
    strides = tuple(a.stride()) if is_torch(a) else tuple(s // a.itemsize for s in a.strides)
    expected = 1
    for d in reversed(order):
        if shape[d] != 1 and strides[d] != expected:
            return False
        expected *= shape[d]
    return True


def to_torch(a: np.ndarray, device: str = "cpu") -> Any:
    """A PyTorch tensor with a NumPy array's values on `device` (on the CPU it may share the array's memory)."""
    import torch

    if any(stride < 0 for stride in a.strides):  # torch.from_numpy takes any other strides (a channels_last view)
        a = np.ascontiguousarray(a)
    if a.dtype.name == "bfloat16":  # PyTorch cannot take NumPy's (ml_dtypes') bfloat16: move the bits
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16).to(device)
    return torch.from_numpy(a).to(device)


def to_device(a: np.ndarray, device: int = 0) -> Any:
    """A device copy of a NumPy array (PyTorch if installed, else CuPy)."""
    try:
        return to_torch(a, f"cuda:{device}")
    except ImportError:
        import cupy

        with cupy.cuda.Device(device):
            return cupy.asarray(a)


def to_host(a: Any) -> np.ndarray:
    if isinstance(a, np.ndarray):
        return a
    if is_torch(a):
        import torch

        if a.dtype == torch.bfloat16:  # NumPy's bfloat16 (ml_dtypes) is unknown to PyTorch: move the bits
            return a.cpu().view(torch.int16).numpy().view(DTYPES["bf16"].numpy_dtype())
        return a.cpu().numpy()
    import cupy

    return cupy.asnumpy(a)


def address(a: Any) -> int:
    """The data pointer of an array of any supported library."""
    if isinstance(a, np.ndarray):
        return a.ctypes.data
    if is_torch(a):
        return a.data_ptr()
    return int(a.__cuda_array_interface__["data"][0])


def zeros(like: Any, shape: int | tuple[int, ...], dtype: str) -> Any:
    """A zeroed array of `dtype` (our name: "f32", "u32", ...) in `like`'s library and device."""
    if isinstance(like, np.ndarray):
        return np.zeros(shape, TYPES[dtype].numpy_dtype())
    if is_torch(like):
        import torch

        return torch.zeros(shape, dtype=torch_dtype(dtype), device=like.device)
    import cupy

    with cupy.cuda.Device(device_of(like)):
        return cupy.zeros(shape, TYPES[dtype].numpy_dtype())


def kept_zeros(like: Any, length: int, dtype: str, stream: int) -> Any:
    """zeros(like, length, dtype) for memory kept between calls (workspaces), zeroed in `stream`'s order. torch's
    comes from its default pool even while this thread allocates to a CUDA graph's private pool: the warm-up of
    torch.compile's reduce-overhead mode sends all of a thread's allocations there and refuses live memory in the
    pool that no output holds. While `stream` is being captured, the graph's pool is where it belongs."""
    from rust_kernels.driver import capturing

    if not (is_torch(like) and like.is_cuda) or capturing(stream):
        return zeros(like, length, dtype)
    return _allocator().submit(_torch_zeros_on, like.device, length, dtype, stream).result()


@cache
def _allocator() -> ThreadPoolExecutor:
    """A thread of our own: torch's allocator routes to a graph's private pool by thread."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="rust_kernels-allocator")


def _torch_zeros_on(device: Any, length: int, dtype: str, stream: int) -> Any:
    import torch

    with torch.cuda.device(device), torch.cuda.stream(torch.cuda.ExternalStream(stream, device=device)):
        return torch.zeros(length, dtype=torch_dtype(dtype), device=device)
