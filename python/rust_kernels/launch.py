"""`load(kernel, device=0, backend="cuda")`: a launchable kernel, on the GPU or in the host emulator."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rust_kernels.errors import ArgumentError

if TYPE_CHECKING:
    from rust_kernels.cuda import CudaKernel
    from rust_kernels.host import HostKernel
    from rust_kernels.kernels import Kernel

BACKENDS = ("cuda", "host")


def check_backend(backend: object) -> str:
    if backend not in BACKENDS:
        raise ArgumentError(f"backend: expected one of {list(BACKENDS)}, got {backend!r}")
    return backend  # type: ignore[return-value]


def load(kernel: Kernel, device: int = 0, backend: str = "cuda", *, checked: bool = True) -> CudaKernel | HostKernel:
    """Loads `kernel` for launching: backend "cuda" finds (or builds) its cubin or PTX for GPU `device`'s arch and
    loads it; backend "host" builds (or finds) it for the CPU emulator (`checked` bounds-checks every access)."""
    if check_backend(backend) == "cuda":
        from rust_kernels.cuda import CudaKernel

        return CudaKernel(kernel, device)
    from rust_kernels.host import HostKernel

    return HostKernel(kernel, checked=checked)
