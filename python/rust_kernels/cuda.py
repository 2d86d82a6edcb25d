"""The GPU backend: load a cached kernel with cuda-python (cuda.bindings) and launch it.

The module is loaded into the device's primary context, which PyTorch and CuPy also use, so their arrays and
streams work as they are. Launches are asynchronous: nothing synchronises after a launch.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from functools import cache, partial
from typing import Any

from rust_kernels import args as kargs
from rust_kernels.builder import cached_entry
from rust_kernels.errors import ArgumentTypeError, LaunchError
from rust_kernels.kernels import Kernel

CTYPES = {
    "ptr": ctypes.c_uint64,
    "i32": ctypes.c_int32,
    "u32": ctypes.c_uint32,
    "i64": ctypes.c_int64,
    "u64": ctypes.c_uint64,
    "f32": ctypes.c_float,
    "f64": ctypes.c_double,
}
DEFAULT_SHARED_LIMIT = 48 * 1024  # bytes of dynamic shared memory a launch may use without opting in


def _driver() -> Any:
    from cuda.bindings import driver

    return driver


def _check(result: tuple, what: str) -> Any:
    """Unwraps a cuda.bindings (CUresult, value...) tuple, raising LaunchError with the driver's own words."""
    driver = _driver()
    err, *values = result
    if err != driver.CUresult.CUDA_SUCCESS:
        name = driver.cuGetErrorName(err)[1]
        text = driver.cuGetErrorString(err)[1]
        raise LaunchError(f"{what}: {name.decode() if name else err} ({text.decode() if text else ''})")
    return values[0] if len(values) == 1 else values


def gpu_available() -> tuple[bool, str]:
    """Whether a CUDA device can be used here, and if not, why."""
    try:
        driver = _driver()
        _check(driver.cuInit(0), "cuInit")
        count = _check(driver.cuDeviceGetCount(), "cuDeviceGetCount")
    except ImportError as err:
        return False, f"cuda-python is not installed ({err})"
    except (LaunchError, RuntimeError, OSError) as err:
        return False, f"no usable CUDA driver or device ({err})"
    if count < 1:
        return False, "the CUDA driver reports no device"
    return True, f"{count} CUDA device(s)"


@cache
def _context(device: int) -> Any:
    """The device's primary context, retained for the process and made current on this thread."""
    driver = _driver()
    _check(driver.cuInit(0), "cuInit")
    handle = _check(driver.cuDeviceGet(device), f"cuDeviceGet({device})")
    context = _check(driver.cuDevicePrimaryCtxRetain(handle), "cuDevicePrimaryCtxRetain")
    _check(driver.cuCtxSetCurrent(context), "cuCtxSetCurrent")
    return context


def compute_capability(device: int) -> tuple[int, int]:
    driver = _driver()
    attr = driver.CUdevice_attribute
    handle = _check(driver.cuDeviceGet(device), f"cuDeviceGet({device})")
    major = _check(driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, handle), "cc")
    minor = _check(driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, handle), "cc")
    return major, minor


@cache
def multiprocessor_count(device: int) -> int:
    driver = _driver()
    handle = _check(driver.cuDeviceGet(device), f"cuDeviceGet({device})")
    attr = driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
    return int(_check(driver.cuDeviceGetAttribute(attr, handle), "multiprocessor count"))


def pointer_device(pointer: int) -> int | None:
    """The ordinal of the device owning `pointer`, or None if the driver does not know the pointer."""
    driver = _driver()
    attr = driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
    err, ordinal = driver.cuPointerGetAttribute(attr, pointer)
    return int(ordinal) if err == driver.CUresult.CUDA_SUCCESS else None


def stream_handle(stream: Any) -> int:
    """A CUstream handle from None (the legacy default stream), an int, or a PyTorch, CuPy or cuda.core stream."""
    if stream is None:
        return 0
    if isinstance(stream, int) and not isinstance(stream, bool):
        return stream
    if hasattr(stream, "__cuda_stream__"):
        return int(stream.__cuda_stream__()[1])
    for attribute in ("cuda_stream", "ptr", "handle"):
        if hasattr(stream, attribute):
            return int(getattr(stream, attribute))
    raise ArgumentTypeError(
        f"stream: expected None, an int handle or a CUDA stream object, got {type(stream).__name__}"
    )


class CudaKernel:
    """A kernel loaded on one GPU. `launch` checks everything against the schema, then launches asynchronously."""

    def __init__(self, kernel: Kernel, device: int = 0) -> None:
        self.kernel = kernel
        self.device = device
        entry = cached_entry(kernel)
        _context(device)
        major, minor = compute_capability(device)
        cubin = entry.file(f"kernel.sm_{major}{minor}.cubin")
        if cubin.is_file():
            image, self.image_kind = cubin.read_bytes(), cubin.name
        else:  # no cubin for this device: the driver JIT-compiles the PTX
            image, self.image_kind = entry.file("kernel.ptx").read_bytes() + b"\0", "kernel.ptx"
        driver = _driver()
        self.module = _check(driver.cuModuleLoadData(image), f"loading {entry.path / self.image_kind}")
        name = kernel.entry_point_name()
        self.function = _check(driver.cuModuleGetFunction(self.module, name.encode()), f"resolving {name}")
        self._shared_limit = DEFAULT_SHARED_LIMIT

    def _allow_shared(self, nbytes: int) -> None:
        driver = _driver()
        attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        _check(driver.cuFuncSetAttribute(self.function, attr, nbytes), f"shared_mem: {nbytes} bytes")
        self._shared_limit = nbytes

    def prepare(
        self, grid: Any, block: Any, args: Any, shared_mem: int | None = None, stream: Any = None
    ) -> Callable[[], None]:
        """Checks and packs a launch once; calling the result launches it again and again with no Python-side
        checking or packing: the path for hot loops. The arrays behind pointer arguments must outlive it."""
        packed = kargs.pack(self.kernel, args, "cuda", self.device)
        grid3, block3, shared = kargs.launch_config(self.kernel, grid, block, packed, shared_mem)
        if shared > self._shared_limit:
            self._allow_shared(shared)
        return _prepared(self, grid3, block3, shared, stream_handle(stream), packed)

    def launch(self, grid: Any, block: Any, args: Any, shared_mem: int | None = None, stream: Any = None) -> None:
        """Launches on `stream` (default: the legacy default stream) without synchronising."""
        self.prepare(grid, block, args, shared_mem, stream)()


@cache
def _cu_launch_kernel() -> Any:
    """The driver's cuLaunchKernel through ctypes. No argtypes: the arguments are prebuilt ctypes objects, passed as
    they are, so a call costs little more than the driver's own."""
    function = ctypes.CDLL("libcuda.so.1").cuLaunchKernel
    function.restype = ctypes.c_int
    return function


def _launch_failed(kernel_id: str, code: int) -> None:
    _check((_driver().CUresult(code),), f"launching {kernel_id}")


@cache
def _native_launch() -> Any:
    """The extension's CudaLaunch (one native call per launch), or None where the extension is not built."""
    try:
        from rust_kernels._host import CudaLaunch
    except ImportError:
        return None
    return CudaLaunch


def _prepared(
    loaded: CudaKernel,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    shared: int,
    stream: int,
    packed: list[kargs.Packed],
) -> Callable[[], None]:
    """A callable that enqueues the launch: the extension's CudaLaunch where it is built, else ctypes."""
    values = [CTYPES[p.type](p.value) for p in packed]  # the driver reads these at each launch
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
