"""The few things the ops need from array libraries: dtype, shape, device, allocation, transfer. PyTorch and CuPy
arrays are used as they are (both share the primary context); NumPy arrays serve the host backend."""

from __future__ import annotations

from typing import Any

import numpy as np

from rust_kernels.errors import ArgumentError, ArgumentTypeError

NAMES = {"float32": "f32", "float64": "f64"}


def is_torch(a: Any) -> bool:
    return type(a).__module__.startswith("torch")


def dtype_name(a: Any) -> str:
    """ "f32"/"f64" for a float32/float64 array of any supported library, else the library's own name."""
    raw = str(a.dtype).removeprefix("torch.")
    return NAMES.get(raw, raw)


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


def empty(like: Any, shape: tuple[int, ...]) -> Any:
    """An uninitialised array of `like`'s library, dtype and device."""
    if isinstance(like, np.ndarray):
        return np.empty(shape, like.dtype)
    if is_torch(like):
        return like.new_empty(shape)
    import cupy

    with cupy.cuda.Device(device_of(like)):
        return cupy.empty(shape, like.dtype)


def to_device(a: np.ndarray, device: int = 0) -> Any:
    """A device copy of a NumPy array (PyTorch if installed, else CuPy)."""
    try:
        import torch

        return torch.from_numpy(np.ascontiguousarray(a)).to(f"cuda:{device}")
    except ImportError:
        import cupy

        with cupy.cuda.Device(device):
            return cupy.asarray(a)


def to_host(a: Any) -> np.ndarray:
    if isinstance(a, np.ndarray):
        return a
    if is_torch(a):
        return a.cpu().numpy()
    import cupy

    return cupy.asnumpy(a)
