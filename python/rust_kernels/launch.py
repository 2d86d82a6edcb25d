"""`load(kernel, device=0, backend="cuda")`: a launchable kernel, on the GPU or in the host emulator."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rust_kernels.errors import ArgumentError

if TYPE_CHECKING:
    from rust_kernels.cuda import CudaKernel
    from rust_kernels.host import HostKernel
    from rust_kernels.kernels import Kernel

BACKENDS = ("cuda", "host")


def load(kernel: Kernel, device: int = 0, backend: str = "cuda", *, checked: bool = True) -> CudaKernel | HostKernel:
    """Loads `kernel` for launching: backend "cuda" builds (or finds) its PTX/cubin and loads it on GPU `device`;
    backend "host" runs it in the CPU emulator (`checked` bounds-checks every access there)."""
    if backend == "cuda":
        from rust_kernels.cuda import CudaKernel

        return CudaKernel(kernel, device)
    if backend == "host":
        from rust_kernels.host import HostKernel

        return HostKernel(kernel, checked=checked)
    raise ArgumentError(f"backend: expected one of {list(BACKENDS)}, got {backend!r}")
