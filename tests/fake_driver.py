"""A stand-in for the driver's cuLaunchKernel, compiled from C, and fake tensors: for testing and timing the
extension's CheckedLaunch and FastCalls without a GPU (tests/test_checked_launch.py, tests/test_calls.py).

The fake records its arguments and reads each kernel parameter through the params array at the width the test sets
(as the driver does, from the kernel's signature), into a buffer Python reads through ctypes.
"""

from __future__ import annotations

import ctypes
import struct
import subprocess
from pathlib import Path
from typing import Any

from rust_kernels import args as kargs
from rust_kernels import driver as kdriver
from rust_kernels.dtypes import BY_NUMPY, BY_TYPESTR, TYPES
from rust_kernels.errors import ArgumentError, ArgumentTypeError
from rust_kernels.kernels import Kernel

ELEMENT_SIZES = {name: t.size for name, t in TYPES.items()}
FUNCTION = 0xF00D  # the CUfunction the fake launches report
CONTEXT = 0xC0C0  # the context checked_launch's launches belong to

SOURCE = r"""
#include <stdint.h>
#include <string.h>

#define MAX_PARAMS 64
int64_t calls;
int32_t result;
uint64_t function, stream, extra;
uint32_t dims[7];
int32_t widths[MAX_PARAMS];  /* set by the test: bytes to read per parameter; 0 ends the list */
unsigned char values[MAX_PARAMS][8];

/* the thread's context stack, as cuCtxGetCurrent / cuCtxPushCurrent / cuCtxPopCurrent keep it */
uint64_t current, launched_in, pushes, stack[16];
int32_t depth;

int32_t fake_ctx_get(uint64_t *out) { *out = current; return 0; }
int32_t fake_ctx_push(uint64_t context) {
    if (depth == 16) return 1;
    stack[depth++] = current;
    current = context;
    pushes++;
    return 0;
}
int32_t fake_ctx_pop(uint64_t *out) {
    if (depth == 0) return 1;
    *out = current;
    current = stack[--depth];
    return 0;
}

int32_t fake_launch(void *f, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz,
                    uint32_t shared, void *s, void **params, void **e) {
    calls++;
    launched_in = current;
    function = (uint64_t)(uintptr_t)f;
    stream = (uint64_t)(uintptr_t)s;
    extra = (uint64_t)(uintptr_t)e;
    uint32_t d[7] = {gx, gy, gz, bx, by, bz, shared};
    memcpy(dims, d, sizeof d);
    memset(values, 0, sizeof values);
    for (int i = 0; i < MAX_PARAMS && widths[i]; i++) memcpy(values[i], params[i], (size_t)widths[i]);
    return result;
}
"""

FORMATS = {"ptr": "<Q", "i32": "<i", "u32": "<I", "i64": "<q", "u64": "<Q", "f32": "<f", "f64": "<d"}


class FakeDriver:
    """The compiled fake: `entry` is the address to give CheckedLaunch."""

    def __init__(self, directory: Path) -> None:
        source, library = directory / "fake_driver.c", directory / "fake_driver.so"
        source.write_text(SOURCE)
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
        self.lib = ctypes.CDLL(str(library))
        self.entry = ctypes.cast(self.lib.fake_launch, ctypes.c_void_p).value
        self.function = self.lib.fake_launch  # callable through ctypes, as rust_kernels.cuda calls the driver
        self.function.restype = ctypes.c_int

    def _global(self, ctype: type, name: str):
        return ctype.in_dll(self.lib, name)

    @property
    def calls(self) -> int:
        return self._global(ctypes.c_int64, "calls").value

    def context(self, context: int) -> tuple[int, int, int, int]:
        """The launchers' `context` argument: the fake's context calls and `context`."""
        names = ("fake_ctx_get", "fake_ctx_push", "fake_ctx_pop")
        return (*(ctypes.cast(getattr(self.lib, n), ctypes.c_void_p).value for n in names), context)  # type: ignore[return-value]

    @property
    def current(self) -> int:
        """The context current on the (fake) thread."""
        return self._global(ctypes.c_uint64, "current").value

    def set_current(self, context: int) -> None:
        self._global(ctypes.c_uint64, "current").value = context

    @property
    def pushes(self) -> int:
        return self._global(ctypes.c_uint64, "pushes").value

    def set_result(self, code: int) -> None:
        self._global(ctypes.c_int32, "result").value = code

    def set_kinds(self, kinds: list[str]) -> None:
        """The parameter types, ABI order ("ptr" or a scalar type): the fake reads each at its width."""
        widths = (ctypes.c_int32 * 64).in_dll(self.lib, "widths")
        for i in range(64):
            widths[i] = struct.calcsize(FORMATS[kinds[i]]) if i < len(kinds) else 0
        self.kinds = list(kinds)

    def last(self) -> dict:
        """What the last launch passed: function, dims (grid, block, shared), stream, extra, and the parameters as
        read (raw bytes) and decoded by type."""
        values = (ctypes.c_ubyte * 8 * 64).in_dll(self.lib, "values")
        raw = [bytes(values[i])[: struct.calcsize(FORMATS[kind])] for i, kind in enumerate(self.kinds)]
        return {
            "raw": raw,  # each parameter's bytes, at its width
            "params": [struct.unpack(FORMATS[kind], r)[0] for kind, r in zip(self.kinds, raw, strict=True)],
            "function": self._global(ctypes.c_uint64, "function").value,
            "dims": tuple((ctypes.c_uint32 * 7).in_dll(self.lib, "dims")),
            "stream": self._global(ctypes.c_uint64, "stream").value,
            "context": self._global(ctypes.c_uint64, "launched_in").value,  # current during the launch
            "extra": self._global(ctypes.c_uint64, "extra").value,
        }


class FakeDtype:
    """Like torch.dtype: a singleton per type whose str() is "torch.<name>"."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __str__(self) -> str:
        return f"torch.{self.name}"

    __repr__ = __str__


DTYPES = {name: FakeDtype(name) for name in ("float32", "float64", "bfloat16", "float16", "int32", "uint32", "int8")}


class FakeTensor:
    """The part of torch.Tensor that rust_kernels.args looks at."""

    def __init__(self, dtype="float32", device=0, contiguous=True, ptr=0x7F00_0000_0000, strides=(4, 1)):
        self.dtype = DTYPES[dtype] if isinstance(dtype, str) else dtype
        self._device, self._contiguous, self._ptr, self._strides = device, contiguous, ptr, strides
        self.nbytes = 256

    @property
    def device(self) -> str:
        return "cpu" if self._device < 0 else f"cuda:{self._device}"

    def get_device(self) -> int:
        return self._device

    def is_contiguous(self) -> bool:
        return self._contiguous

    def data_ptr(self) -> int:
        return self._ptr

    def stride(self) -> tuple[int, ...]:
        return self._strides


class DeviceArray:
    """A stand-in device array: only __cuda_array_interface__, as CuPy or Numba expose it."""

    def __init__(self, shape=(2, 3), typestr="<f4", strides=None, ptr=0x7F00_0000_0000):
        self.__cuda_array_interface__ = {
            "shape": shape,
            "typestr": typestr,
            "strides": strides,
            "data": (ptr, False),
            "version": 3,
        }


def kinds_of(kernel: Kernel) -> list[str]:
    return ["ptr" if is_pointer else kind for is_pointer, kind, _, _ in kargs._schema(kernel)]


def _unexpected_failure(code: int) -> None:
    raise AssertionError(f"unexpected launch failure {code}")


def checked_launch(kernel: Kernel, driver: FakeDriver, **options: Any) -> Any:
    """A CheckedLaunch for `kernel` as rust_kernels.cuda would build one (with the fake driver and fake tensors)."""
    from rust_kernels._host import CheckedLaunch

    names = [arg.name for arg in kernel.spec.args]
    settings = {
        "entry": driver.entry,
        "context": driver.context(CONTEXT),
        "function": FUNCTION,
        "name": kernel.name,
        "kernel_id": kernel.id,
        "arg_names": names,
        "schema": [entry[:3] for entry in kargs._schema(kernel)],
        "grid": [d if isinstance(d, int) else -(1 + names.index(d)) for d in kernel.spec.grid],
        "block": kernel.block_dim,
        "min_shared": kernel.shared_mem_bytes,
        "max_shared": 48 * 1024,
        "device": 0,
        "element_sizes": ELEMENT_SIZES,
        "elements": BY_NUMPY,
        "typestrs": BY_TYPESTR,
        "tensor_type": FakeTensor,
        "argument_error": ArgumentError,
        "argument_type_error": ArgumentTypeError,
        "pointer_device": lambda ptr: kdriver.pointer_device(ptr),
        "on_error": _unexpected_failure,
        "stream_handle": kdriver.stream_handle,
    }
    driver.set_kinds(kinds_of(kernel))
    return CheckedLaunch(**(settings | options))
