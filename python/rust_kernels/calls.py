"""The ops' fast path on PyTorch CUDA tensors. What an op call decides (its checks passed, the plan, the loaded
kernel, the kernel's eps) depends only on the call's *signature*: per array its shape, dtype, device, contiguity and
address alignment, plus the op's scalar arguments. An op decides once per signature, with every check and a checked
launch, and keeps the decision here; a later call of the same signature allocates its outputs, resolves the stream
and launches unchecked (CudaKernel.enqueue): host cost near the driver's own launch.

Only plain tensors (torch.Tensor and nn.Parameter, on a CUDA device) have signatures: NumPy, CuPy and tensor
subclasses (fake, functional, distributed tensors) take the checked path on every call.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from rust_kernels import driver

MAX_SIGNATURES = 4096  # per op; a program cycling through more starts afresh (and re-checks) past this
SCALARS = (bool, int, float, str, type(None))  # scalar arguments a signature takes by value


def _plain_tensor_types() -> tuple[type, ...] | None:
    torch = sys.modules.get("torch")  # never imported here: without torch there are no tensors to speed up
    return None if torch is None else (torch.Tensor, torch.nn.Parameter)


def python_signature(
    arrays: tuple[Any, ...], scalars: tuple[Any, ...], plain: tuple[type, ...], scalar_types: tuple[type, ...]
) -> tuple | None:
    """`signature` in Python (the extension's `signature` computes the same in one native call)."""
    for s in scalars:
        if type(s) not in scalar_types:
            return None
    key: list[Hashable] = list(scalars)
    for a in arrays:
        if type(a) not in plain:
            return None
        device = a.get_device()
        if device < 0:
            return None
        key.append((a.shape, a.dtype, device, a.is_contiguous(), a.data_ptr() % 16))
    return tuple(key)


def _native_signature() -> Callable[..., tuple | None]:
    try:
        from rust_kernels._host import signature
    except ImportError:
        return python_signature
    return signature  # type: ignore[no-any-return]


_signature = _native_signature()


_plain: tuple[type, ...] | None = None  # set once torch is imported
torch: Any = None  # the torch module, once a signature found it imported: what the fast paths allocate with


def signature(arrays: tuple[Any, ...], scalars: tuple[Any, ...] = ()) -> Hashable | None:
    """The key of a call on `arrays` with scalar arguments `scalars`: the scalars, then per array (shape, dtype,
    device, contiguity, address mod 16); None where the call has no fast path."""
    global _plain, torch
    if _plain is None:
        _plain = _plain_tensor_types()
        if _plain is None:
            return None
        torch = sys.modules["torch"]
    return _signature(arrays, scalars, _plain, SCALARS)


@dataclass(frozen=True)
class Decision:
    """What an op call decided, reused by the calls of its signature; ops extend it with their own."""

    plan: Any
    loaded: Any  # the CudaKernel (or HostKernel) of plan.kernel
    shape: tuple[int, ...]
    device: int
    grid: tuple[int, int, int]
    scalars: tuple[int | float, ...]  # the kernel's scalar arguments, after its arrays


def launch_stream(device: int, stream: Any) -> int:
    """The CUstream a fast-path call launches on: `stream`, or torch's current stream on `device`."""
    return int(torch._C._cuda_getCurrentRawStream(device)) if stream is None else driver.stream_handle(stream)


class Decisions(dict):  # type: ignore[type-arg]
    """One op's decisions by signature: `get` is dict's (a None key is never kept); `put` keeps at most
    MAX_SIGNATURES."""

    def put(self, key: Hashable | None, decision: Any) -> None:
        """Keeps `decision` for `key` (after a checked launch with it succeeded); None keys are not kept."""
        if key is None:
            return
        if len(self) >= MAX_SIGNATURES:
            self.clear()
        self[key] = decision
