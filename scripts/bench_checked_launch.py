"""Host time of a checked launch: the extension's CheckedLaunch against today's Python path (args.pack +
args.launch_config + ctypes parameter arrays, as CudaKernel.launch does), with a fake cuLaunchKernel compiled from C
and fake tensors, so it runs anywhere (no GPU). A report, not a test:

    PYTHONPATH=python python3 scripts/bench_checked_launch.py [--number 20000] [--rounds 5]

The kernel is batch_norm_2d_nchw_backward_split (bf16): 10 pointer arguments (fake tensors) and 5 scalars.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fake_driver import FakeDriver, FakeTensor
from rust_kernels import _host, cuda
from rust_kernels import args as kargs
from rust_kernels.errors import ArgumentError, ArgumentTypeError
from rust_kernels.kernels import BatchNorm2dNchwBackwardSplit
from rust_kernels.spec import ELEMENT_SIZES, ELEMENTS

KERNEL = BatchNorm2dNchwBackwardSplit(block_hw=128, vectorized=0, deterministic=1, dtype="bf16")
FUNCTION = 0xF00D
GRID, BLOCK = (3, 4), 128


def arguments(pointer) -> list:
    pointers = [pointer("bfloat16", 0x7F00_0000_0000 + 0x100 * i) for i in range(8)]
    pointers += [pointer("float32", 0x7E00_0000_0000), pointer("uint32", 0x7D00_0000_0000)]
    return [*pointers, 2, 3, 20, 1e-5, 4]


def checked(driver: FakeDriver) -> _host.CheckedLaunch:
    names = [arg.name for arg in KERNEL.spec.args]
    return _host.CheckedLaunch(
        entry=driver.entry,
        function=FUNCTION,
        name=KERNEL.name,
        kernel_id=KERNEL.id,
        arg_names=names,
        schema=kargs._schema(KERNEL),
        grid=[d if isinstance(d, int) else -(1 + names.index(d)) for d in KERNEL.spec.grid],
        block=KERNEL.block_dim,
        min_shared=KERNEL.shared_mem_bytes,
        max_shared=cuda.DEFAULT_SHARED_LIMIT,
        device=0,
        element_sizes=ELEMENT_SIZES,
        elements=ELEMENTS,
        typestrs=kargs.TYPESTRS,
        tensor_type=FakeTensor,
        argument_error=ArgumentError,
        argument_type_error=ArgumentTypeError,
        pointer_device=lambda ptr: 0,
        on_error=print,
        stream_handle=cuda.stream_handle,
    )


def python_path(driver: FakeDriver, native: bool) -> cuda.CudaKernel:
    """A CudaKernel of today's cuda.py whose driver is the fake (native: the prepared launch is the extension's
    CudaLaunch, as on a machine with the extension built; else ctypes)."""
    cuda._cu_launch_kernel = lambda: driver.function
    cuda._native_launch = (lambda: _host.CudaLaunch) if native else (lambda: None)
    loaded = object.__new__(cuda.CudaKernel)
    loaded.kernel, loaded.device, loaded.function = KERNEL, 0, FUNCTION
    loaded._shared_limit = cuda.DEFAULT_SHARED_LIMIT
    return loaded


def per_call_us(call, number: int, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(number):
            call()
        times.append((time.perf_counter() - start) / number * 1e6)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    driver = FakeDriver(Path(tempfile.mkdtemp(prefix="fake_driver")))
    driver.set_kinds(["ptr" if p else kind for p, kind, _ in kargs._schema(KERNEL)])
    tensors = arguments(lambda dtype, ptr: FakeTensor(dtype, ptr=ptr))
    raw = arguments(lambda dtype, ptr: ptr)
    launch = checked(driver)
    native_prepared = python_path(driver, native=True).prepare(GRID, BLOCK, tensors)
    loaded, fallback = python_path(driver, native=True), python_path(driver, native=False)
    rows = [
        ("CheckedLaunch, fake tensors", lambda: launch(GRID, BLOCK, tensors)),
        ("CheckedLaunch, raw int pointers", lambda: launch(GRID, BLOCK, raw)),
        (
            "today: CudaKernel.launch (args.py, ctypes, CudaLaunch), fake tensors",
            lambda: loaded.launch(GRID, BLOCK, tensors),
        ),
        ("today: CudaKernel.launch, ctypes fallback, fake tensors", lambda: fallback.launch(GRID, BLOCK, tensors)),
        ("prepared CudaLaunch (no checks: the floor)", native_prepared),
    ]
    for _, call in rows:  # warm up, and every path must launch
        before = driver.calls
        call()
        assert driver.calls == before + 1
    print(f"{KERNEL.id}: 10 pointer + 5 scalar arguments; median of {options.rounds} x {options.number} calls")
    print(f"{'path':<76} {'us/call':>8}")
    for label, call in rows:
        print(f"{label:<76} {per_call_us(call, options.number, options.rounds):8.2f}")


if __name__ == "__main__":
    main()
