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

from rust_kernels import driver
from rust_kernels.dtypes import BY_TYPESTR, INT_RANGES, TYPES, name_of
from rust_kernels.errors import ArgumentError, ArgumentTypeError
from rust_kernels.kernels import Kernel

F32_MAX = float(np.finfo(np.float32).max)


class Packed(NamedTuple):  # a tuple: built for every argument of every checked launch
    """One argument as the launcher passes it: a pointer (with the byte extent behind it) or a scalar."""

    type: str  # "ptr" or a scalar type name ("i32", "f32", ...)
    value: int | float
    nbytes: int = 0


@cache
def _schema(kernel: Kernel) -> tuple[tuple[bool, str, str, bool], ...]:
    """Per argument: is it a pointer, its element (pointers) or scalar type, how errors name it, and whether the
    kernel writes through it. Derived once per kernel from the spec, so a launch only compares."""
    return tuple(
        (
            arg.is_pointer,
            arg.element(kernel.dtype, kernel.param_dtype),
            f"{kernel.name}: argument {i} ({name}: {rust_type})",
            arg.output,
        )
        for i, (arg, (name, rust_type)) in enumerate(zip(kernel.spec.args, kernel.args, strict=True))
    )


def _contiguous(shape: Sequence[int], strides: Sequence[int] | None, itemsize: int) -> bool:
    if strides is None or 0 in shape:  # an empty array is contiguous whatever its strides
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
        got = _torch_elements[dtype] = name_of(dtype)
    if got != element:
        raise ArgumentError(f"{where}: expected a tensor of {element}, got dtype {value.dtype}")
    if value.get_device() != device:  # -1 for CPU tensors
        raise ArgumentError(f"{where}: expected a tensor on cuda:{device}, got one on {value.device}")
    if not value.is_contiguous():
        raise ArgumentError(f"{where}: expected a contiguous tensor, got strides {tuple(value.stride())}")
    return Packed("ptr", value.data_ptr(), value.nbytes)


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
    got = BY_TYPESTR.get(interface["typestr"], interface["typestr"])
    packed = _checked_extent(where, element, got, interface["data"][0], interface["shape"], interface.get("strides"))
    owner = driver.pointer_device(packed.value) if packed.value else device
    if owner != device:
        raise ArgumentError(f"{where}: expected memory on device {device}, got memory on device {owner}")
    return packed


def _checked_extent(
    where: str, element: str, got: str, pointer: int, shape: Sequence[int], strides: Sequence[int] | None
) -> Packed:
    if got != element:
        raise ArgumentError(f"{where}: expected an array of {element}, got {got}")
    itemsize = TYPES[element].size
    if not _contiguous(shape, strides, itemsize):
        raise ArgumentError(f"{where}: expected a C-contiguous array, got strides {tuple(strides or ())}")
    return Packed("ptr", pointer, math.prod(shape) * itemsize)


def _host_pointer(where: str, value: Any, element: str, output: bool) -> Packed:
    if not isinstance(value, np.ndarray):
        raise ArgumentTypeError(
            f"{where}: the host backend takes NumPy arrays for pointer arguments, got {type(value).__name__}"
        )
    if output and not value.flags.writeable:
        raise ArgumentError(f"{where}: the kernel writes this array, but it is read-only (flags.writeable is False)")
    return _checked_extent(where, element, name_of(value.dtype), value.ctypes.data, value.shape, value.strides)


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
    for (is_pointer, kind, where, output), value in zip(_schema(kernel), values, strict=True):
        if not is_pointer:
            packed.append(_scalar(where, value, kind))
        elif backend == "cuda":
            packed.append(_cuda_pointer(where, value, kind, device))
        else:
            packed.append(_host_pointer(where, value, kind, output))
    check_requirements(kernel, [p.value for p in packed])
    return packed


def check_requirements(kernel: Kernel, values: Sequence[int | float]) -> None:
    """The spec's launch preconditions (e.g. a vectorized variant's divisibility and alignment) on the packed values
    (pointers as addresses)."""
    if not kernel.spec.requires:
        return
    names = dict(zip((arg.name for arg in kernel.spec.args), values, strict=True)) | kernel.spec_names
    for requirement in kernel.spec.requires:
        if not requirement.holds(names):
            raise ArgumentError(f"{kernel.id}: {requirement.message} (requires {requirement.check})")


def dim3(name: str, value: Any) -> tuple[int, int, int]:
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        dims: tuple = (value,)
    elif isinstance(value, Sequence) and not isinstance(value, str | bytes):
        dims = tuple(value)
    else:
        raise ArgumentError(f"{name}: expected an int or 1 to 3 ints, got {value!r}")
    if not 1 <= len(dims) <= 3 or any(isinstance(d, bool) or not isinstance(d, int | np.integer) for d in dims):
        raise ArgumentError(f"{name}: expected an int or 1 to 3 ints, got {value!r}")
    x, y, z = (*map(int, dims), 1, 1)[:3]
    if min(x, y, z) < 1:
        raise ArgumentError(f"{name}: every dimension must be at least 1, got {value!r}")
    return (x, y, z)


@cache
def _scalar_positions(kernel: Kernel) -> tuple[tuple[str, int], ...]:
    return tuple((arg.name, i) for i, arg in enumerate(kernel.spec.args) if not arg.is_pointer)


# Dynamic shared memory one CTA may use: the H100/H200 opt-in maximum (227 KiB); the host emulator's limit, and the
# GPU backend's unless the device reports its own.
MAX_SHARED_MEM_BYTES = 232448
MAX_GRID = (2**31 - 1, 65535, 65535)


def launch_config(
    kernel: Kernel,
    grid: Any,
    block: Any,
    packed: list[Packed],
    shared_mem: int | None,
    max_shared: int = MAX_SHARED_MEM_BYTES,
) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    """Checks grid, block and shared memory against the kernel's spec; returns them normalised."""
    grid3, block3 = dim3("grid", grid), dim3("block", block)
    if block3 != kernel.block_dim:
        raise ArgumentError(f"block: {kernel.id} is written for a CTA of {kernel.block_dim}, got {block3}")
    expected = kernel.grid_dim({name: packed[i].value for name, i in _scalar_positions(kernel)})
    if any(e is not None and e != g for e, g in zip(expected, grid3, strict=True)):
        shown = tuple("any" if e is None else e for e in expected)
        raise ArgumentError(f"grid: {kernel.name} expects {shown} for these arguments, got {grid3}")
    if any(g > limit for g, limit in zip(grid3, MAX_GRID, strict=True)):
        raise ArgumentError(f"grid: {grid3} exceeds the largest grid {MAX_GRID}")
    shared = kernel.shared_mem_bytes if shared_mem is None else shared_mem
    if isinstance(shared, bool) or not isinstance(shared, int | np.integer) or shared < kernel.shared_mem_bytes:
        raise ArgumentError(f"shared_mem: {kernel.id} needs at least {kernel.shared_mem_bytes} bytes, got {shared!r}")
    if shared > max_shared:
        raise ArgumentError(f"shared_mem: {kernel.id} may use at most {max_shared} bytes per CTA, got {shared}")
    return grid3, block3, int(shared)
