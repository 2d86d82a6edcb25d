"""cuda-python (cuda.bindings) at the lowest level: the driver module, error checking, the primary context, device
and pointer attributes, and stream handles. Used by the GPU backend and by argument checks."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

from rust_kernels.errors import ArgumentTypeError, LaunchError


def driver_module() -> Any:
    from cuda.bindings import driver

    return driver


def check(result: tuple, what: str) -> Any:
    """Unwraps a cuda.bindings (CUresult, value...) tuple, raising LaunchError with the driver's own words."""
    driver = driver_module()
    err, *values = result
    if err != driver.CUresult.CUDA_SUCCESS:
        name = driver.cuGetErrorName(err)[1]
        text = driver.cuGetErrorString(err)[1]
        raise LaunchError(f"{what}: {name.decode() if name else err} ({text.decode() if text else ''})")
    return values[0] if len(values) == 1 else values


def gpu_available() -> tuple[bool, str]:
    """Whether a CUDA device can be used here, and if not, why."""
    try:
        driver = driver_module()
        check(driver.cuInit(0), "cuInit")
        count = check(driver.cuDeviceGetCount(), "cuDeviceGetCount")
    except ImportError as err:
        return False, f"cuda-python is not installed ({err})"
    except (LaunchError, RuntimeError, OSError) as err:
        return False, f"no usable CUDA driver or device ({err})"
    if count < 1:
        return False, "the CUDA driver reports no device"
    return True, f"{count} CUDA device(s)"


def bind_context(device: int) -> None:
    """Makes the device's primary context current on this thread if none is, as PyTorch's runtime would on its
    first call there (user threads may have none; the driver API calls that check pointers need one)."""
    primary = context(device)  # first: it names why where no GPU can be used
    driver = driver_module()
    if not int(check(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")):
        check(driver.cuCtxSetCurrent(primary), "cuCtxSetCurrent")


@cache
def context(device: int) -> Any:
    """The device's primary context (PyTorch's and CuPy's too), retained for the process."""
    usable, why = gpu_available()
    if not usable:
        raise LaunchError(f"no GPU to launch on: {why}; the CPU emulator runs the same kernels (ops: backend='host'; "
                          "kernels: compile(kernel, target='host'))")  # fmt: skip
    driver = driver_module()
    handle = check(driver.cuDeviceGet(device), f"cuDeviceGet({device})")
    return check(driver.cuDevicePrimaryCtxRetain(handle), "cuDevicePrimaryCtxRetain")


@contextmanager
def current(device: int) -> Iterator[None]:
    """The device's primary context current for the block: as things are where it is already, else pushed and popped
    after, so the thread's current context (PyTorch's current device) is left as it was. Module loads and function
    attributes act on the current context: a kernel for device 1 must not land in device 0's."""
    driver = driver_module()
    wanted = context(device)
    if int(check(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")) == int(wanted):
        yield
        return
    check(driver.cuCtxPushCurrent(wanted), "cuCtxPushCurrent")
    try:
        yield
    finally:
        check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")


@cache
def context_entries(device: int) -> tuple[int, int, int, int]:
    """What the native launchers switch contexts with: the addresses of cuCtxGetCurrent, cuCtxPushCurrent and
    cuCtxPopCurrent, and the device's primary context."""
    import ctypes

    libcuda = ctypes.CDLL("libcuda.so.1")
    names = ("cuCtxGetCurrent", "cuCtxPushCurrent_v2", "cuCtxPopCurrent_v2")
    addresses = tuple(ctypes.cast(getattr(libcuda, name), ctypes.c_void_p).value for name in names)
    return (*addresses, int(context(device)))  # type: ignore[return-value]


@cache
def compute_capability(device: int) -> tuple[int, int]:
    driver = driver_module()
    attr = driver.CUdevice_attribute
    handle = check(driver.cuDeviceGet(device), f"cuDeviceGet({device})")
    major = check(driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, handle), "cc")
    minor = check(driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, handle), "cc")
    return major, minor


@cache
def multiprocessor_count(device: int) -> int:
    driver = driver_module()
    handle = check(driver.cuDeviceGet(device), f"cuDeviceGet({device})")
    attr = driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
    return int(check(driver.cuDeviceGetAttribute(attr, handle), "multiprocessor count"))


def pointer_device(pointer: int) -> int | None:
    """The ordinal of the device owning `pointer`, or None if the driver does not know the pointer."""
    driver = driver_module()
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


@cache
def max_shared_per_block(device: int) -> int:
    """The most dynamic shared memory one CTA may opt in to on `device`."""
    driver = driver_module()
    handle = check(driver.cuDeviceGet(device), f"cuDeviceGet({device})")
    attr = driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
    return int(check(driver.cuDeviceGetAttribute(attr, handle), "max shared memory per block"))


def capturing(stream: int) -> bool:
    """Whether `stream` is being captured into a CUDA graph."""
    driver = driver_module()
    status = check(driver.cuStreamIsCapturing(driver.CUstream(stream)), "cuStreamIsCapturing")
    return bool(status != driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE)


def current_stream(device: int, like: Any) -> int:
    """The stream a launch goes to when none is given: the current stream of `like`'s array library on `device`
    (PyTorch's, CuPy's), else the legacy default stream. That is where the library's own kernels run, so ordering,
    CUDA-graph capture and the caching allocators' stream semantics hold."""
    module = type(like).__module__
    if module.startswith("torch"):
        import torch

        return int(torch._C._cuda_getCurrentRawStream(device))
    if module.startswith("cupy"):
        import cupy

        return int(cupy.cuda.get_current_stream().ptr)
    return 0
