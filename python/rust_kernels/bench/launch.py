"""The launch benchmark: host time per launch of one loaded kernel on a tiny problem through each launch path, from
the bare driver call through ctypes (the floor) to our checked launch, cuda.core and CuPy; CUDA-graph replay against
direct launches; and the time to load the module from its cubin against JIT-compiling its PTX."""

from __future__ import annotations

import ctypes
import importlib
import statistics
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

from rust_kernels.bench.report import Measure, fmt
from rust_kernels.bench.timing import ROUNDS, Loop, host_and_gpu_us, repeat
from rust_kernels.dtypes import TYPES

LAUNCHES = 20_000
GRAPH_LAUNCHES = 100  # kernels per captured graph
GRAPH_REPLAYS = 200
LOADS = 20
EPS = 1e-5


class TinyLaunch:
    """One loaded kernel (the seed BN2d backward) and one checked, packed set of arguments for a problem small enough
    for the GPU to keep pace with the host, shared by every launch path."""

    def __init__(self, torch: Any) -> None:
        from rust_kernels import args as kargs
        from rust_kernels.cuda import CudaKernel, _ctype
        from rust_kernels.kernels import BatchNorm2dNchwBackward  # type: ignore[attr-defined]

        self.kernel = BatchNorm2dNchwBackward(block_hw=256, dtype="f32")
        self.loaded = CudaKernel(self.kernel, 0)
        batches, channels, hw = 1, 1, 32
        dy, x, dx = (torch.randn(batches * channels * hw, device="cuda") for _ in range(3))
        weight, mean, var, dweight, dbias = (torch.rand(channels, device="cuda") + 0.5 for _ in range(5))
        self.args = [dy, x, dx, weight, mean, var, dweight, dbias, batches, channels, hw, EPS]
        self.packed = kargs.pack(self.kernel, self.args, "cuda", self.loaded.device)
        self.grid, self.block, self.shared = kargs.launch_config(
            self.kernel, (channels,), self.kernel.block_dim, self.packed, None
        )
        self._values = [_ctype(p.type)(p.value) for p in self.packed]  # the driver reads these at each launch
        self.params = (ctypes.c_void_p * len(self._values))(*(ctypes.addressof(v) for v in self._values))

    def launcher_args(self, pointer: Callable[[Any, int], Any]) -> tuple[Any, ...]:
        """The arguments for a third-party launcher: `pointer(array, address)` for pointers, NumPy scalars else."""
        return launcher_args(self.args, self.packed, pointer)

    def image(self) -> tuple[Path, bool]:
        """The image CudaKernel loads on this device: the cubin for its arch (True), else the PTX (False)."""
        from rust_kernels.builder import entry_for_arch
        from rust_kernels.cuda import device_arch

        arch = device_arch(self.loaded.device)
        entry = entry_for_arch(self.kernel, arch)
        cubin = entry.file(f"kernel.{arch}.cubin")
        return (cubin, True) if cubin.is_file() else (entry.file("kernel.ptx"), False)


def launcher_args(args: list[Any], packed: list[Any], pointer: Callable[[Any, int], Any]) -> tuple[Any, ...]:
    """Packed arguments (rust_kernels.args.Packed) for a third-party launcher: `pointer(array, address)` for
    pointers, a NumPy scalar of the parameter's type for scalars."""
    return tuple(
        pointer(a, int(p.value)) if p.type == "ptr" else TYPES[p.type].numpy_dtype().type(p.value)
        for a, p in zip(args, packed, strict=True)
    )


def expect_success(code: Any, what: str) -> None:
    """Raises unless `code`, a CUresult (enum from cuda.bindings, int from ctypes), is CUDA_SUCCESS."""
    value = int(getattr(code, "value", code))
    if value:
        raise RuntimeError(f"{what} failed with CUresult {value}")


def cuda_core() -> ModuleType:
    """cuda.core's public namespace: `cuda.core` (1.x), else `cuda.core.experimental` (0.x)."""
    try:
        module = importlib.import_module("cuda.core")
        if hasattr(module, "launch"):
            return module
    except ImportError:
        pass
    return importlib.import_module("cuda.core.experimental")


def ctypes_loop(t: TinyLaunch) -> Loop:
    launch = ctypes.CDLL("libcuda.so.1").cuLaunchKernel  # its own function object: argtypes set here only
    launch.restype = ctypes.c_int
    launch.argtypes = [ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    dims = (ctypes.c_uint(d) for d in (*t.grid, *t.block, t.shared))
    handle, params = ctypes.c_void_p(int(t.loaded.function)), ctypes.cast(t.params, ctypes.c_void_p)
    argv = (handle, *dims, ctypes.c_void_p(0), params, ctypes.c_void_p(None))  # stream 0: the legacy default stream
    expect_success(launch(*argv), "ctypes cuLaunchKernel")
    return repeat(partial(launch, *argv))


def bindings_loop(t: TinyLaunch) -> Loop:
    from cuda.bindings.driver import cuLaunchKernel

    function, shared, params = t.loaded.function, t.shared, ctypes.addressof(t.params)
    (gx, gy, gz), (bx, by, bz) = t.grid, t.block
    argv = (function, gx, gy, gz, bx, by, bz, shared, 0, params, 0)
    expect_success(cuLaunchKernel(*argv)[0], "cuLaunchKernel")
    return repeat(partial(cuLaunchKernel, *argv))


def prepared_loop(t: TinyLaunch) -> Loop:
    return repeat(t.loaded.prepare(t.grid, t.block, t.args))


def checked_loop(t: TinyLaunch) -> Loop:
    return repeat(partial(t.loaded.launch, t.grid, t.block, t.args))


def cuda_core_loop(t: TinyLaunch) -> Loop:
    core = cuda_core()
    device = core.Device(t.loaded.device)
    device.set_current()
    path, is_cubin = t.image()
    code = core.ObjectCode.from_cubin(path.read_bytes()) if is_cubin else core.ObjectCode.from_ptx(path.read_bytes())
    kernel = code.get_kernel(t.kernel.entry_point_name())
    config = core.LaunchConfig(grid=t.grid, block=t.block, shmem_size=t.shared)
    stream = getattr(core, "LEGACY_DEFAULT_STREAM", None)  # as for every other path here
    if stream is None:
        stream = core.Stream.from_handle(0)
    args = t.launcher_args(lambda _, address: address)  # a Python int is taken as a pointer
    core.launch(stream, config, kernel, *args)
    return repeat(partial(core.launch, stream, config, kernel, *args))


def cupy_loop(t: TinyLaunch) -> Loop:
    import cupy

    path, _ = t.image()
    function = cupy.RawModule(path=str(path)).get_function(t.kernel.entry_point_name())
    args = t.launcher_args(lambda array, _: cupy.asarray(array))  # zero-copy views of the same torch tensors
    call = partial(function, t.grid, t.block, args, shared_mem=t.shared)
    call()
    return repeat(call)


LAUNCH_PATHS: list[tuple[str, Callable[[TinyLaunch], Loop]]] = [
    ("ctypes cuLaunchKernel (prebuilt params)", ctypes_loop),
    ("cuda.bindings cuLaunchKernel (prebuilt params)", bindings_loop),
    ("rust_kernels prepared", prepared_loop),
    ("rust_kernels launch (checked)", checked_loop),
    ("cuda.core launch", cuda_core_loop),
    ("CuPy RawModule", cupy_loop),
]


def guarded(section: str, name: str, unit: str, measure: Callable[[], list[Measure]]) -> list[Measure]:
    """The rows of `measure`, or one n/a row saying why: a missing or incompatible third-party library, or a
    failure in one section, must not end the run or lose the other sections."""
    try:
        return measure()
    except Exception as err:
        return [Measure(section, name, None, unit, note=f"{type(err).__name__}: {err}")]


def launch_row(torch: Any, t: TinyLaunch, name: str, make: Callable[[TinyLaunch], Loop]) -> list[Measure]:
    return [Measure("launch", name, host_and_gpu_us(torch, make(t), LAUNCHES)[0], "µs/launch")]


def launch_rows(torch: Any, t: TinyLaunch) -> list[Measure]:
    rows = []
    for name, make in LAUNCH_PATHS:
        rows += guarded("launch", name, "µs/launch", partial(launch_row, torch, t, name, make))
        print(f"  {name}: {fmt(rows[-1].value, '.3f')} µs per launch {rows[-1].note}", flush=True)
    return rows


def graph_rows(torch: Any, t: TinyLaunch) -> list[Measure]:
    """Host (and GPU) time per kernel: a captured graph of GRAPH_LAUNCHES prepared launches, replayed, against the
    same launches made directly, both on one side stream."""
    stream = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        captured = t.loaded.prepare(t.grid, t.block, t.args, stream=torch.cuda.current_stream())
        for _ in range(GRAPH_LAUNCHES):
            captured()
    direct = t.loaded.prepare(t.grid, t.block, t.args, stream=stream)
    with torch.cuda.stream(stream):
        replay_host, replay_gpu = host_and_gpu_us(torch, repeat(graph.replay), GRAPH_REPLAYS)
        direct_host, direct_gpu = host_and_gpu_us(torch, repeat(direct), GRAPH_REPLAYS * GRAPH_LAUNCHES)
    per = GRAPH_LAUNCHES
    return [
        Measure("graph", "direct prepared launches (side stream)", direct_host, "µs/kernel", direct_gpu),
        Measure(
            "graph", f"CUDA graph replay ({per} launches per graph)", replay_host / per, "µs/kernel", replay_gpu / per
        ),
    ]


def median_ms(action: Callable[[int], Any], count: int = LOADS) -> float:
    """Median wall ms of `action(i)` for i in range(count)."""
    times = []
    for index in range(count):
        begin = time.perf_counter()
        action(index)
        times.append((time.perf_counter() - begin) * 1e3)
    return statistics.median(times)


def load_rows(t: TinyLaunch) -> list[Measure]:
    """Median ms to load the kernel: our CudaKernel (cache lookup + cubin), the bare cubin load, and the PTX."""
    from rust_kernels import driver
    from rust_kernels.cuda import CudaKernel

    cu = driver.driver_module()
    modules = []
    path, is_cubin = t.image()
    ptx = path.with_name("kernel.ptx").read_bytes()

    def ours(_: int) -> None:
        modules.append(CudaKernel(t.kernel, t.loaded.device).module)

    def load(image: bytes) -> None:
        modules.append(driver.check(cu.cuModuleLoadData(image), "cuModuleLoadData"))

    def raw_image(_: int) -> None:
        load(path.read_bytes() + (b"" if is_cubin else b"\0"))

    def raw_ptx(index: int) -> None:
        load(ptx + f"\n// load {index}\n".encode() + b"\0")  # a distinct comment per load defeats the JIT cache

    image_kind = "cubin" if is_cubin else "PTX: no cubin for this device"
    try:
        return [
            Measure("load", f"rust_kernels CudaKernel(k) ({image_kind}, with cache lookup)", median_ms(ours), "ms"),
            Measure("load", f"cuModuleLoadData ({image_kind})", median_ms(raw_image), "ms"),
            Measure("load", "cuModuleLoadData (PTX, driver JIT, uncached)", median_ms(raw_ptx), "ms"),
        ]
    finally:
        for module in modules:
            driver.check(cu.cuModuleUnload(module), "cuModuleUnload")


def run(torch: Any) -> list[Measure]:
    print(f"launch benchmark: host time per launch, median of {ROUNDS} rounds of {LAUNCHES}", flush=True)
    tiny = TinyLaunch(torch)
    rows = launch_rows(torch, tiny)
    print(f"  CUDA graph: {GRAPH_REPLAYS} replays of {GRAPH_LAUNCHES} prepared launches", flush=True)
    rows += guarded("graph", "CUDA graph replay", "µs/kernel", partial(graph_rows, torch, tiny))
    print(f"  module load: median of {LOADS}", flush=True)
    return rows + guarded("load", "module load", "ms", partial(load_rows, tiny))
