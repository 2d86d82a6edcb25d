"""The one table of element and scalar types: names as kernels, NumPy, PyTorch, the array interfaces, ctypes and the
host emulator's C ABI spell them. Every other module looks types up here."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import cache

import numpy as np


@dataclass(frozen=True)
class ScalarType:
    """One element or scalar type, by our (Rust) name."""

    name: str  # the Rust type: "f32", "bf16", "i32", ...
    numpy: str  # NumPy's and PyTorch's name ("bfloat16" comes from ml_dtypes for NumPy)
    size: int
    typestr: str | None  # __cuda_array_interface__ / __array_interface__ typestr (little-endian); none for bf16
    ctype: type | None  # the ctypes type a kernel parameter of this type is passed as (None: storage only)
    host_code: int | None  # the emulator's C ABI kind code (cuda_std::host RawArg), for scalars
    is_float: bool

    def numpy_dtype(self) -> np.dtype:
        if self.name == "bf16":
            import ml_dtypes  # NumPy has no bfloat16 of its own

            return np.dtype(ml_dtypes.bfloat16)
        return np.dtype(self.numpy)


TYPES: dict[str, ScalarType] = {
    t.name: t
    for t in (
        ScalarType("f32", "float32", 4, "<f4", ctypes.c_float, 5, True),
        ScalarType("f64", "float64", 8, "<f8", ctypes.c_double, 6, True),
        ScalarType("bf16", "bfloat16", 2, None, None, None, True),
        ScalarType("f16", "float16", 2, "<f2", None, None, True),
        ScalarType("i32", "int32", 4, "<i4", ctypes.c_int32, 1, False),
        ScalarType("u32", "uint32", 4, "<u4", ctypes.c_uint32, 2, False),
        ScalarType("i64", "int64", 8, "<i8", ctypes.c_int64, 3, False),
        ScalarType("u64", "uint64", 8, "<u8", ctypes.c_uint64, 4, False),
    )
}
SCALARS = tuple(name for name, t in TYPES.items() if t.ctype is not None)  # types a scalar parameter may have
BY_NUMPY = {t.numpy: t.name for t in TYPES.values()}  # "float32" -> "f32"; also PyTorch's dtype names
BY_TYPESTR = {t.typestr: t.name for t in TYPES.values() if t.typestr}
INT_RANGES = {
    name: ((-(2 ** (8 * t.size - 1)), 2 ** (8 * t.size - 1) - 1) if name[0] == "i" else (0, 2 ** (8 * t.size) - 1))
    for name, t in TYPES.items()
    if not t.is_float
}
POINTER_CTYPE = ctypes.c_uint64
POINTER_HOST_CODE = 0


@dataclass(frozen=True)
class FloatType:
    """A kernel dtype D: its storage type and the type kernels accumulate it in (Float::Acc), with the roundoff
    figures the tolerance models use."""

    name: str
    acc: str
    unit_roundoff: float  # of the accumulation type
    storage_roundoff: float  # of rounding a result from the accumulation type into this one (0: no rounding)
    smallest_subnormal: float

    @property
    def size(self) -> int:
        return TYPES[self.name].size

    @property
    def acc_size(self) -> int:
        return TYPES[self.acc].size

    @property
    def numpy(self) -> str:
        return TYPES[self.name].numpy

    @property
    def acc_numpy(self) -> str:
        return TYPES[self.acc].numpy

    def numpy_dtype(self) -> np.dtype:
        return TYPES[self.name].numpy_dtype()


DTYPES: dict[str, FloatType] = {
    "f32": FloatType("f32", "f32", 2.0**-24, 0.0, 2.0**-149),
    "f64": FloatType("f64", "f64", 2.0**-53, 0.0, 2.0**-1074),
    "bf16": FloatType("bf16", "f32", 2.0**-24, 2.0**-8, 2.0**-133),
    "f16": FloatType("f16", "f32", 2.0**-24, 2.0**-11, 2.0**-24),
}


_NAMES: dict[object, str] = {}  # dtype object -> our name: ops look dtypes up on every call


def name_of(dtype: object) -> str:
    """Our name for a NumPy, PyTorch or CuPy dtype ("float32", torch.float32 -> "f32"); else the dtype's own name.
    NumPy byte order is part of the type: a big-endian array is not an f32 array."""
    name = _NAMES.get(dtype)
    if name is None:
        if isinstance(dtype, np.dtype) and dtype.byteorder == ">":
            name = f"big-endian {dtype.name}"
        else:
            raw = str(dtype).removeprefix("torch.")
            name = BY_NUMPY.get(raw, raw)
        _NAMES[dtype] = name
    return name


@cache
def torch_dtype(name: str) -> object:
    """PyTorch's dtype for one of our names."""
    import torch

    return getattr(torch, TYPES[name].numpy)


def activations(key: str) -> str:
    """The activations' dtype of a dtype key: "bf16-f32" (bf16 activations, f32 parameters) -> "bf16"."""
    return key.split("-")[0]
