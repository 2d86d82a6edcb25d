"""The ops' fast path on PyTorch CUDA tensors. What an op call decides (its checks passed, the plan, the loaded
kernel, its grid and scalar arguments) depends only on the call's *signature*: its scalar arguments, the stream it
launches on and, per array, shape, dtype, device, contiguity and address modulo 16. An op decides a signature once,
with every check and a checked launch, and remembers the launch in its `FastCalls` (the extension's); a later call of
that signature is one native call: signature, output allocations, packing and cuLaunchKernel, no checks. Host cost
per call is then below PyTorch's own op.

Only plain tensors (torch.Tensor and nn.Parameter, on a CUDA device) and plain scalars (None, bool, int, float) have
signatures: NumPy, CuPy and tensor subclasses (fake, functional, distributed tensors) take the checked path on every
call, as every call does where the extension is not built.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

MAX_SIGNATURES = 4096  # per op; a program cycling through more starts afresh (and re-checks) past this
NO_EXTENSION = (
    "rust_kernels: the native extension (rust_kernels._host) is not built, so op calls on PyTorch CUDA tensors have "
    "no fast path: each is checked and planned again, about 1 ms of host time a call (an H200's host, 12-06). Install "
    "the wheel, or build the extension (README: Installing)."
)


def torch_library() -> tuple[tuple[type, ...], Any, Any] | None:
    """What the fast path calls in PyTorch: (the plain tensor types, torch.empty_like, the current CUstream of a
    device); None until PyTorch is imported (never imported here: without it there are no tensors to speed up)."""
    torch = sys.modules.get("torch")
    current_stream = getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None)
    if current_stream is None:  # not imported (or a build without CUDA, whose tensors have no fast path)
        return None
    return (torch.Tensor, torch.nn.Parameter), torch.empty_like, current_stream


class _Unavailable:
    """FastCalls where the extension is not built: no call has a fast path. A call it is asked to remember (one on
    PyTorch CUDA tensors, which would have had one) warns, once a process (the warning's default filter)."""

    def __call__(self, arrays: tuple[Any, ...], scalars: tuple[Any, ...], stream: int | None = None) -> None:
        return None

    def remember(self, *_args: Any) -> bool:
        warnings.warn(NO_EXTENSION, RuntimeWarning, stacklevel=1)
        return False

    def __len__(self) -> int:
        return 0


def fast_calls() -> Any:
    """A new op's FastCalls: `calls(arrays, scalars, stream)` gives the outputs of a decided signature's launch, or
    None; `calls.remember(...)` keeps a checked launch (rust_kernels._host.FastCalls documents both)."""
    try:
        from rust_kernels._host import FastCalls
    except ImportError:
        return _Unavailable()
    return FastCalls(MAX_SIGNATURES, torch_library)
