"""The host backend: run a kernel in the CPU emulator compiled into the `rust_kernels._host` extension.

The extension is built by maturin from the same generated `source` of every catalogue instance that goes to PTX;
a descriptor whose source differs from the compiled one (a template edited since the build) is refused as stale.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from rust_kernels import args as kargs
from rust_kernels.errors import LaunchError, RustKernelsError
from rust_kernels.kernels import Kernel

BUILD_HINT = "pip install --no-build-isolation -e .   (from the repository root; needs Rust and maturin)"


@cache
def _extension() -> Any:
    try:
        from rust_kernels import _host
    except ImportError as err:
        raise RustKernelsError(
            f"the host emulator extension rust_kernels._host is not built ({err}): {BUILD_HINT}"
        ) from None
    return _host


def host_available() -> tuple[bool, str]:
    try:
        _extension()
    except RustKernelsError as err:
        return False, str(err)
    return True, "rust_kernels._host"


@cache
def _catalogue() -> dict[str, tuple[str, tuple[tuple[str, str], ...]]]:
    return {id_: (sha, tuple(map(tuple, params))) for id_, sha, params in _extension().kernels()}


class HostKernel:
    """A kernel instance in the CPU emulator: the same `launch` as on the GPU, taking NumPy arrays for pointers."""

    def __init__(self, kernel: Kernel, checked: bool = True) -> None:
        catalogue = _catalogue()
        if kernel.id not in catalogue:
            raise RustKernelsError(f"{kernel.id} is not in the host extension's catalogue; rebuild it: {BUILD_HINT}")
        sha, params = catalogue[kernel.id]
        if sha != kernel.source_sha256 or params != kernel.args:
            raise RustKernelsError(
                f"the host extension holds a stale build of {kernel.id} (its source differs from the templates'); "
                f"rebuild it: {BUILD_HINT}"
            )
        self.kernel = kernel
        self.checked = checked

    def launch(self, grid: Any, block: Any, args: Any, shared_mem: int | None = None, stream: Any = None) -> None:
        """Runs the kernel to completion (`stream` is accepted for symmetry and ignored)."""
        packed = kargs.pack(self.kernel, args, "host")
        grid3, block3, shared = kargs.launch_config(self.kernel, grid, block, packed, shared_mem)
        values = [(p.type, p.value, p.nbytes) for p in packed]
        try:
            _extension().launch(self.kernel.id, grid3, block3, shared, values, self.checked)
        except _extension().KernelError as err:
            raise LaunchError(str(err)) from None
