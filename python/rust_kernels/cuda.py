"""The GPU backend: a kernel's cached PTX or cubin loaded with cuda-python into the device's primary context (which
PyTorch and CuPy also use, so their arrays and streams work as they are), and launched asynchronously: nothing
synchronises after a launch."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from functools import cache, partial
from typing import Any

from rust_kernels import args as kargs
from rust_kernels import cache as kcache
from rust_kernels import driver
from rust_kernels.dtypes import POINTER_CTYPE, TYPES
from rust_kernels.kernels import Kernel

DEFAULT_SHARED_LIMIT = 48 * 1024  # bytes of dynamic shared memory a launch may use without opting in


def device_arch(device: int) -> str:
    major, minor = driver.compute_capability(device)
    return f"sm_{major}{minor}"


class CudaKernel:
    """A kernel loaded on one GPU. `launch` checks everything against the schema, then launches asynchronously."""

    def __init__(self, kernel: Kernel, device: int = 0, entry: kcache.Entry | None = None) -> None:
        from rust_kernels.builder import entry_for_arch

        self.kernel = kernel
        self.device = device
        driver.context(device)
        arch = device_arch(device)
        entry = entry or entry_for_arch(kernel, arch)
        cubin = entry.file(f"kernel.{arch}.cubin")
        if cubin.is_file():
            image, self.image_kind = cubin.read_bytes(), cubin.name
        else:  # no cubin for this device: the driver JIT-compiles the PTX
            image, self.image_kind = entry.file("kernel.ptx").read_bytes() + b"\0", "kernel.ptx"
        cu = driver.driver_module()
        self.module = driver.check(cu.cuModuleLoadData(image), f"loading {entry.path / self.image_kind}")
        name = kernel.entry_point_name()
        self.function = driver.check(cu.cuModuleGetFunction(self.module, name.encode()), f"resolving {name}")
        self._shared_limit = DEFAULT_SHARED_LIMIT
        self.max_shared = driver.max_shared_per_block(device)

    def _allow_shared(self, nbytes: int) -> None:
        cu = driver.driver_module()
        attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        driver.check(cu.cuFuncSetAttribute(self.function, attr, nbytes), f"shared_mem: {nbytes} bytes")
        self._shared_limit = nbytes

    def prepare(
        self, grid: Any, block: Any, args: Any, shared_mem: int | None = None, stream: Any = None
    ) -> Callable[[], None]:
        """Checks and packs a launch once; calling the result launches it again and again with no Python-side
        checking or packing: the path for hot loops. The arrays behind pointer arguments must outlive it.
        `stream` None means the current stream of the first array argument's library (see driver.current_stream)."""
        packed = kargs.pack(self.kernel, args, "cuda", self.device)
        grid3, block3, shared = kargs.launch_config(self.kernel, grid, block, packed, shared_mem, self.max_shared)
        if shared > self._shared_limit:
            self._allow_shared(shared)
        if stream is None:
            like = next((a for a in args if not isinstance(a, int | float)), None)
            handle = driver.current_stream(self.device, like)
        else:
            handle = driver.stream_handle(stream)
        return _prepared(self, grid3, block3, shared, handle, packed)

    def launch(self, grid: Any, block: Any, args: Any, shared_mem: int | None = None, stream: Any = None) -> None:
        """Launches on `stream` (default: the current stream of the arrays' library) without synchronising."""
        self.prepare(grid, block, args, shared_mem, stream)()


@cache
def _cu_launch_kernel() -> Any:
    """The driver's cuLaunchKernel through ctypes. No argtypes: the arguments are prebuilt ctypes objects, passed as
    they are, so a call costs little more than the driver's own."""
    function = ctypes.CDLL("libcuda.so.1").cuLaunchKernel
    function.restype = ctypes.c_int
    return function


def _launch_failed(kernel_id: str, code: int) -> None:
    driver.check((driver.driver_module().CUresult(code),), f"launching {kernel_id}")


@cache
def _native_launch() -> Any:
    """The extension's CudaLaunch (one native call per launch), or None where the extension is not built."""
    try:
        from rust_kernels._host import CudaLaunch
    except ImportError:
        return None
    return CudaLaunch


def _ctype(kind: str) -> Any:
    return POINTER_CTYPE if kind == "ptr" else TYPES[kind].ctype


def _prepared(
    loaded: CudaKernel,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    shared: int,
    stream: int,
    packed: list[kargs.Packed],
) -> Callable[[], None]:
    """A callable that enqueues the launch: the extension's CudaLaunch where it is built, else ctypes."""
    values = [_ctype(p.type)(p.value) for p in packed]  # the driver reads these at each launch
    params = (ctypes.c_void_p * len(values))(*(ctypes.addressof(v) for v in values))
    on_error = partial(_launch_failed, loaded.kernel.id)
    native = _native_launch()
    if native is not None:
        entry = ctypes.cast(_cu_launch_kernel(), ctypes.c_void_p).value
        dims = (*grid, *block, shared)
        return native(entry, int(loaded.function), dims, stream, ctypes.addressof(params), (values, params), on_error)
    handle = ctypes.c_void_p(int(loaded.function))
    dims = [ctypes.c_uint(d) for d in (*grid, *block, shared)]
    arguments = (handle, *dims, ctypes.c_void_p(stream), ctypes.cast(params, ctypes.c_void_p), None)
    call = partial(_cu_launch_kernel(), *arguments)  # bound in C: no argument handling per launch

    def launch() -> None:
        code = call()
        if code:
            on_error(code)

    launch.keep = (values, params)  # type: ignore[attr-defined]
    return launch
