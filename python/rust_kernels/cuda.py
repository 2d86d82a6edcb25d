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
from rust_kernels.dtypes import BY_NUMPY, BY_TYPESTR, POINTER_CTYPE, TYPES
from rust_kernels.errors import ArgumentError, ArgumentTypeError
from rust_kernels.kernels import Kernel
from rust_kernels.spec import FREE

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
        driver.bind_context(device)
        arch = device_arch(device)
        entry = entry or entry_for_arch(kernel, arch)
        cubin = entry.file(f"kernel.{arch}.cubin")
        if cubin.is_file():
            image, self.image_kind = cubin.read_bytes(), cubin.name
        else:  # no cubin for this device: the driver JIT-compiles the PTX
            image, self.image_kind = entry.file("kernel.ptx").read_bytes() + b"\0", "kernel.ptx"
        cu = driver.driver_module()
        with driver.current(device):  # loaded into the device's context, whichever is current on this thread
            self.module = driver.check(cu.cuModuleLoadData(image), f"loading {entry.path / self.image_kind}")
            name = kernel.entry_point_name()
            self.function = driver.check(cu.cuModuleGetFunction(self.module, name.encode()), f"resolving {name}")
        self._shared_limit = DEFAULT_SHARED_LIMIT
        self.max_shared = driver.max_shared_per_block(device)
        # the extension's CheckedLaunch (None where it is not built); the ops' fast paths (rust_kernels.calls) keep it
        self.checked = _checked_launch(self)
        self._resident: dict[tuple[int, int], int] = {}  # a cooperative kernel's CTAs an SM, per (threads, shared)

    def _allow_shared(self, nbytes: int) -> None:
        cu = driver.driver_module()
        attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        with driver.current(self.device):
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
        if self.kernel.spec.cooperative:
            self._check_resident(grid3, block3, shared)
        if stream is None:
            like = next((a for a in args if not isinstance(a, int | float)), None)
            handle = driver.current_stream(self.device, like)
        else:
            handle = driver.stream_handle(stream)
        return _prepared(self, grid3, block3, shared, handle, packed)

    def _check_resident(self, grid: tuple[int, int, int], block: tuple[int, int, int], shared: int) -> None:
        """A cooperative launch's CTAs must all be resident at once (grid::sync waits for every one): refuses a grid
        larger than the device's SMs hold of this kernel (its registers, block and shared memory), before the driver
        would."""
        threads, ctas = block[0] * block[1] * block[2], grid[0] * grid[1] * grid[2]
        per_sm = self._resident.get((threads, shared))
        if per_sm is None:
            cu = driver.driver_module()
            with driver.current(self.device):
                per_sm = driver.check(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(self.function, threads, shared),
                                      f"occupancy of {self.kernel.id}")  # fmt: skip
            self._resident[threads, shared] = per_sm
        sms = driver.multiprocessor_count(self.device)
        if ctas > per_sm * sms:
            raise ArgumentError(
                f"grid: {self.kernel.id} is cooperative (every CTA resident at once, for grid::sync): this device "
                f"holds at most {per_sm * sms} of its CTAs of {threads} threads with {shared} bytes of shared memory "
                f"({per_sm} on each of {sms} SMs), got {ctas}"
            )

    def launch(self, grid: Any, block: Any, args: Any, shared_mem: int | None = None, stream: Any = None) -> None:
        """Launches on `stream` (default: the current stream of the arrays' library) without synchronising. Every
        argument is checked first (in one native call where the extension is built)."""
        if self.checked is None:
            self.prepare(grid, block, args, shared_mem, stream)()
            return
        if self.kernel.spec.cooperative:
            shared = self.kernel.shared_mem_bytes if shared_mem is None else shared_mem
            self._check_resident(kargs.dim3("grid", grid), kargs.dim3("block", block), shared)
        if stream is None:
            stream = driver.current_stream(self.device, args[0] if isinstance(args, list | tuple) and args else None)
        self.checked(grid, block, args, shared_mem, stream)


def _checked_launch(loaded: CudaKernel) -> Any:
    """The extension's CheckedLaunch for this kernel: the checks of args.pack and args.launch_config, the packing
    and cuLaunchKernel in one native call; None where the extension is not built."""
    try:
        from rust_kernels._host import CheckedLaunch
    except ImportError:
        return None
    import sys

    kernel = loaded.kernel
    names = [a.name for a in kernel.spec.args]
    grid = [0 if d == FREE else d if isinstance(d, int) else -(1 + names.index(d)) for d in kernel.spec.grid]
    torch = sys.modules.get("torch")
    return CheckedLaunch(
        entry=ctypes.cast(_cu_launch_kernel(kernel.spec.cooperative), ctypes.c_void_p).value,
        context=driver.context_entries(loaded.device),
        function=int(loaded.function),
        name=kernel.name,
        kernel_id=kernel.id,
        arg_names=names,
        schema=[entry[:3] for entry in kargs._schema(kernel)],
        grid=grid,
        block=kernel.block_dim,
        min_shared=kernel.shared_mem_bytes,
        max_shared=loaded.max_shared,
        device=loaded.device,
        element_sizes={name: t.size for name, t in TYPES.items()},
        elements=BY_NUMPY,
        typestrs=BY_TYPESTR,
        tensor_type=getattr(torch, "Tensor", None),
        argument_error=ArgumentError,
        argument_type_error=ArgumentTypeError,
        pointer_device=lambda pointer: driver.pointer_device(pointer),  # late-bound: tests replace it
        on_error=partial(_launch_failed, kernel.id),
        stream_handle=driver.stream_handle,
        allowed_shared=DEFAULT_SHARED_LIMIT,
        allow_shared=loaded._allow_shared,
        precheck=partial(kargs.check_requirements, kernel) if kernel.spec.requires else None,
        cooperative=kernel.spec.cooperative,
    )


@cache
def _cu_launch_kernel(cooperative: bool = False) -> Any:
    """The driver's cuLaunchKernel (or cuLaunchCooperativeKernel, which takes no `extra` argument) through ctypes. No
    argtypes: the arguments are prebuilt ctypes objects, passed as they are, so a call costs little more than the
    driver's own."""
    function = getattr(ctypes.CDLL("libcuda.so.1"), "cuLaunchCooperativeKernel" if cooperative else "cuLaunchKernel")
    function.restype = ctypes.c_int
    return function


def _launch_failed(kernel_id: str, code: int) -> None:
    """The launchers' on_error: raises LaunchError with the driver's words for CUresult `code`."""
    cu = driver.driver_module()
    driver.check((cu.CUresult(code),), f"launching {kernel_id}")


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
    """A callable that enqueues the launch (through cuLaunchCooperativeKernel for a cooperative kernel): the
    extension's CudaLaunch where it is built, else ctypes."""
    values = [_ctype(p.type)(p.value) for p in packed]  # the driver reads these at each launch
    params = (ctypes.c_void_p * len(values))(*(ctypes.addressof(v) for v in values))
    on_error = partial(_launch_failed, loaded.kernel.id)
    cooperative = loaded.kernel.spec.cooperative
    native = _native_launch()
    if native is not None:
        entry = ctypes.cast(_cu_launch_kernel(cooperative), ctypes.c_void_p).value
        dims = (*grid, *block, shared)
        context = driver.context_entries(loaded.device)
        keep = (values, params)
        return native(entry, context, int(loaded.function), dims, stream, ctypes.addressof(params), keep, on_error,
                      cooperative)  # fmt: skip
    handle = ctypes.c_void_p(int(loaded.function))
    dims = [ctypes.c_uint(d) for d in (*grid, *block, shared)]
    arguments = (handle, *dims, ctypes.c_void_p(stream), ctypes.cast(params, ctypes.c_void_p))
    extra = () if cooperative else (None,)
    call = partial(_cu_launch_kernel(cooperative), *arguments, *extra)  # bound in C: no argument handling per launch

    def launch() -> None:
        with driver.current(loaded.device):  # as the native launchers: in the kernel's context
            code = call()
        if code:
            on_error(code)

    launch.keep = (values, params)  # type: ignore[attr-defined]
    return launch
