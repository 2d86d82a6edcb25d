"""The host backend: a kernel instance built as a shared library for the CPU emulator (cuda_std's host side), on
demand and cached like the PTX (rust_kernels.builder.build_host), and launched through its C entry
`rk_host_launch` (see cuda_std::export_host_launch) with ctypes.

The launch runs on a worker thread while the calling thread waits, so Ctrl-C is honoured during a long launch: it
asks the emulator to stop (`rk_host_cancel`), waits for its threads to leave, and raises KeyboardInterrupt.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from rust_kernels import args as kargs
from rust_kernels.dtypes import POINTER_HOST_CODE, TYPES
from rust_kernels.errors import LaunchError
from rust_kernels.kernels import Kernel

ERROR_CAPACITY = 4096


class RawArg(ctypes.Structure):
    """cuda_std::host::RawArg: a kind code, the bytes behind a pointer, and the value's bits."""

    _fields_ = (("kind", ctypes.c_uint32), ("bytes", ctypes.c_uint64), ("bits", ctypes.c_uint64))


@cache
def _library(path: Path) -> ctypes.CDLL:
    library = ctypes.CDLL(str(path))
    library.rk_host_launch.restype = ctypes.c_int32
    library.rk_host_launch.argtypes = (
        ctypes.POINTER(RawArg), ctypes.c_size_t, ctypes.POINTER(ctypes.c_uint32), ctypes.c_uint64, ctypes.c_uint32,
        ctypes.c_char_p, ctypes.c_size_t,
    )  # fmt: skip
    library.rk_host_cancel.restype = None
    library.rk_host_cancel.argtypes = ()
    for name in ("rk_host_param_name", "rk_host_param_type"):
        getattr(library, name).restype = ctypes.c_char_p
        getattr(library, name).argtypes = (ctypes.c_size_t,)
    library.rk_host_param_count.restype = ctypes.c_size_t
    return library


def _params(library: ctypes.CDLL) -> tuple[tuple[str, str], ...]:
    """The (name, Rust type) of each parameter of the library's kernel, as compiled."""
    count = library.rk_host_param_count()
    return tuple((library.rk_host_param_name(i).decode(), library.rk_host_param_type(i).decode()) for i in range(count))


def _raw(packed: kargs.Packed) -> RawArg:
    if packed.type == "ptr":
        return RawArg(POINTER_HOST_CODE, packed.nbytes, packed.value)
    scalar = TYPES[packed.type]
    bits = scalar.ctype(packed.value)  # the value at its width, then its bit pattern zero-extended
    return RawArg(scalar.host_code, 0, int.from_bytes(bytes(bits), "little"))


def host_available() -> tuple[bool, str]:
    """Whether kernels can run in the host emulator here: it needs a Rust toolchain to build them, or a cache that
    holds them already."""
    from rust_kernels.errors import ToolchainMissing
    from rust_kernels.toolchain import find_toolchain

    try:
        find_toolchain()
    except ToolchainMissing as missing:
        return False, f"no Rust toolchain to build host kernels ({missing})"
    return True, "host kernels are built on demand"


class HostKernel:
    """A kernel instance in the CPU emulator: the same `launch` as on the GPU, taking NumPy arrays for pointers."""

    def __init__(self, kernel: Kernel, checked: bool = True, library: Path | None = None) -> None:
        from rust_kernels.builder import build_host

        self.kernel = kernel
        self.checked = checked
        # rk_host_launch's flags: bit 0 bounds-checks every access, bit 1 runs every CTA at once (grid::sync).
        self._flags = int(checked) | (2 if kernel.spec.cooperative else 0)
        path = library or build_host(kernel)
        self.library = _library(path)
        compiled = _params(self.library)
        if compiled != kernel.args:
            raise LaunchError(f"{path} holds a kernel with parameters {compiled}, not {kernel.id}'s {kernel.args}")

    def launch(self, grid: Any, block: Any, args: Any, shared_mem: int | None = None, stream: Any = None) -> None:
        """Runs the kernel to completion (`stream` is accepted for symmetry and ignored)."""
        self.prepare(grid, block, args, shared_mem, stream)()

    def prepare(
        self, grid: Any, block: Any, args: Any, shared_mem: int | None = None, stream: Any = None
    ) -> Callable[[], None]:
        """Checks and packs a launch once, as CudaKernel.prepare does; calling the result runs it again and again.
        The arrays behind pointer arguments must outlive it."""
        packed = kargs.pack(self.kernel, args, "host")
        grid3, block3, shared = kargs.launch_config(self.kernel, grid, block, packed, shared_mem)
        raw = (RawArg * len(packed))(*map(_raw, packed))
        dims = (ctypes.c_uint32 * 6)(*grid3, *block3)
        return lambda: self._run(raw, len(packed), dims, shared)

    def _run(self, raw: Any, count: int, dims: Any, shared: int) -> None:
        error = ctypes.create_string_buffer(ERROR_CAPACITY)
        status: list[int] = []
        call = self.library.rk_host_launch
        # Completion is our own event, not Thread.is_alive: a join interrupted by Ctrl-C can leave the thread
        # reported dead while its launch runs on (CPython 3.11), and the launch would then never be cancelled.
        done = threading.Event()

        def run() -> None:
            try:
                status.append(call(raw, count, dims, shared, self._flags, error, len(error)))
            finally:
                done.set()

        threading.Thread(target=run, name=f"rust_kernels host launch of {self.kernel.id}", daemon=True).start()
        try:
            while not done.wait(0.05):
                pass
        except KeyboardInterrupt:
            while not done.wait(0.01):  # a cancel that comes before the launch has started is lost: repeat it
                self.library.rk_host_cancel()
            raise
        if status[0] != 0:
            raise LaunchError(error.value.decode(errors="replace"))
