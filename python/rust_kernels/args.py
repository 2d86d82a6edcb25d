"""Checking and packing launch arguments by the kernel's schema (`Kernel.args`), for both backends.

Everything here runs before a launch: a wrong count, type, dtype, device, a non-contiguous array or an out-of-range
scalar raises an ArgumentError naming the argument; nothing is launched and no memory is touched.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from typing import Any, NamedTuple

import numpy as np

from rust_kernels.errors import ArgumentError, ArgumentTypeError
from rust_kernels.kernels import Kernel
from rust_kernels.spec import ELEMENT_SIZES, ELEMENTS

INT_RANGES = {"i32": (-(2**31), 2**31 - 1), "u32": (0, 2**32 - 1), "i64": (-(2**63), 2**63 - 1), "u64": (0, 2**64 - 1)}
F32_MAX = float(np.finfo(np.float32).max)
TYPESTRS = {"<f4": "f32", "<f8": "f64", "<f2": "f16", "<i4": "i32", "<u4": "u32", "<i8": "i64", "<u8": "u64"}


class Packed(NamedTuple):  # a tuple: built for every argument of every checked launch
    """One argument as the launcher passes it: a pointer (with the byte extent behind it) or a scalar."""

    type: str  # "ptr" or a scalar type name ("i32", "f32", ...)
    value: int | float
    nbytes: int = 0


@cache
def _schema(kernel: Kernel) -> tuple[tuple[bool, str, str], ...]:
    """Per argument: is it a pointer, its element (pointers) or scalar type, and how errors name it. Derived once
    per kernel from the spec, so a launch only compares."""
    return tuple(
        (arg.is_pointer, arg.element(kernel.dtype) if arg.is_pointer else arg.type, f"{kernel.name}: argument {i} "
         f"({name}: {rust_type})")
        for i, (arg, (name, rust_type)) in enumerate(zip(kernel.spec.args, kernel.args, strict=True))
    )  # fmt: skip


def _contiguous(shape: Sequence[int], strides: Sequence[int] | None, itemsize: int) -> bool:
    if strides is None:
        return True
    expected = itemsize
    for size, stride in zip(reversed(shape), reversed(strides), strict=True):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


_torch_elements: dict[Any, str | None] = {}  # torch.dtype -> our name, filled as dtypes are seen


def _torch_pointer(where: str, value: Any, element: str, device: int) -> Packed:
    dtype = value.dtype
    got = _torch_elements.get(dtype)
    if got is None:
        got = _torch_elements[dtype] = ELEMENTS.get(str(dtype).removeprefix("torch."))
    if got != element:
        raise ArgumentError(f"{where}: expected a tensor of {element}, got dtype {value.dtype}")
    if value.get_device() != device:  # -1 for CPU tensors
        raise ArgumentError(f"{where}: expected a tensor on cuda:{device}, got one on {value.device}")
    if not value.is_contiguous():
        raise ArgumentError(f"{where}: expected a contiguous tensor, got strides {tuple(value.stride())}")
    return Packed("ptr", value.data_ptr(), value.nbytes)


def _device_of(pointer: int) -> int | None:
    from rust_kernels.cuda import pointer_device

    return pointer_device(pointer)


def _cuda_pointer(where: str, value: Any, element: str, device: int) -> Packed:
    if isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value < 2**64:
            raise ArgumentError(f"{where}: a raw device pointer must be a non-negative 64-bit address, got {value}")
        return Packed("ptr", value)  # raw pointers carry no extent or dtype to check
    if hasattr(value, "data_ptr") and hasattr(value, "is_contiguous"):
        return _torch_pointer(where, value, element, device)
    interface = getattr(value, "__cuda_array_interface__", None)
    if interface is None:
        kind = "a host (NumPy) array" if hasattr(value, "__array_interface__") else type(value).__name__
        raise ArgumentTypeError(
            f"{where}: expected a device array (__cuda_array_interface__) or a raw device pointer, got {kind}"
        )
    got = TYPESTRS.get(interface["typestr"], interface["typestr"])
    packed = _checked_extent(where, element, got, interface["data"][0], interface["shape"], interface.get("strides"))
    owner = _device_of(packed.value) if packed.value else device
    if owner != device:
        raise ArgumentError(f"{where}: expected memory on device {device}, got memory on device {owner}")
    return packed


def _checked_extent(
    where: str, element: str, got: str, pointer: int, shape: Sequence[int], strides: Sequence[int] | None
) -> Packed:
    if got != element:
        raise ArgumentError(f"{where}: expected an array of {element}, got {got}")
    itemsize = ELEMENT_SIZES[element]
    if not _contiguous(shape, strides, itemsize):
        raise ArgumentError(f"{where}: expected a C-contiguous array, got strides {tuple(strides or ())}")
    return Packed("ptr", pointer, math.prod(shape) * itemsize)


def _host_pointer(where: str, value: Any, element: str) -> Packed:
    if not isinstance(value, np.ndarray):
        raise ArgumentTypeError(
            f"{where}: the host backend takes NumPy arrays for pointer arguments, got {type(value).__name__}"
        )
    got = ELEMENTS.get(value.dtype.name, value.dtype.name)
    return _checked_extent(where, element, got, value.ctypes.data, value.shape, value.strides)


def _scalar(where: str, value: Any, kind: str) -> Packed:
    if isinstance(value, bool | np.bool_):
        raise ArgumentTypeError(f"{where}: expected a number, got a bool")
    if kind in INT_RANGES:
        if not isinstance(value, int | np.integer):
            raise ArgumentTypeError(f"{where}: expected an integer, got {type(value).__name__}")
        low, high = INT_RANGES[kind]
        if not low <= int(value) <= high:
            raise ArgumentError(f"{where}: {value} is out of the {kind} range [{low}, {high}]")
        return Packed(kind, int(value))
    if not isinstance(value, int | float | np.integer | np.floating):
        raise ArgumentTypeError(f"{where}: expected a float, got {type(value).__name__}")
    value = float(value)
    if kind == "f32" and math.isfinite(value) and abs(value) > F32_MAX:
        raise ArgumentError(f"{where}: {value} does not fit in an f32")
    return Packed(kind, value)


def pack(kernel: Kernel, values: Sequence[Any], backend: str, device: int = 0) -> list[Packed]:
    """Checks `values` against the kernel's signature and returns them packed for `backend` ("cuda" or "host")."""
    if isinstance(values, str | bytes) or not isinstance(values, Sequence):
        raise ArgumentTypeError(f"{kernel.name}: args must be a sequence, got {type(values).__name__}")
    if len(values) != len(kernel.args):
        names = ", ".join(name for name, _ in kernel.args)
        raise ArgumentError(f"{kernel.name} takes {len(kernel.args)} arguments ({names}), got {len(values)}")
    packed = []
    for (is_pointer, kind, where), value in zip(_schema(kernel), values, strict=True):
        if not is_pointer:
            packed.append(_scalar(where, value, kind))
        elif backend == "cuda":
            packed.append(_cuda_pointer(where, value, kind, device))
        else:
            packed.append(_host_pointer(where, value, kind))
    return packed


def _dim3(name: str, value: Any) -> tuple[int, int, int]:
    dims = (value,) if isinstance(value, int) else tuple(value)
    if not 1 <= len(dims) <= 3 or any(isinstance(d, bool) or not isinstance(d, int | np.integer) for d in dims):
        raise ArgumentError(f"{name}: expected an int or 1 to 3 ints, got {value!r}")
    x, y, z = (*map(int, dims), 1, 1)[:3]
    if min(x, y, z) < 1:
        raise ArgumentError(f"{name}: every dimension must be at least 1, got {value!r}")
    return (x, y, z)


@cache
def _scalar_positions(kernel: Kernel) -> tuple[tuple[str, int], ...]:
    return tuple((arg.name, i) for i, arg in enumerate(kernel.spec.args) if not arg.is_pointer)


def launch_config(
    kernel: Kernel, grid: Any, block: Any, packed: list[Packed], shared_mem: int | None
) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    """Checks grid, block and shared memory against the kernel's spec; returns them normalised."""
    grid3, block3 = _dim3("grid", grid), _dim3("block", block)
    if block3 != kernel.block_dim:
        raise ArgumentError(f"block: {kernel.id} is written for a CTA of {kernel.block_dim}, got {block3}")
    expected = kernel.grid_dim({name: packed[i].value for name, i in _scalar_positions(kernel)})
    if grid3 != expected:
        raise ArgumentError(f"grid: {kernel.name} expects {expected} for these arguments, got {grid3}")
    shared = kernel.shared_mem_bytes if shared_mem is None else shared_mem
    if isinstance(shared, bool) or not isinstance(shared, int) or shared < kernel.shared_mem_bytes:
        raise ArgumentError(f"shared_mem: {kernel.id} needs at least {kernel.shared_mem_bytes} bytes, got {shared!r}")
    return grid3, block3, shared
