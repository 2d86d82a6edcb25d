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
from typing import Any

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


def signature(arrays: tuple[Any, ...], scalars: tuple[Any, ...] = ()) -> Hashable | None:
    """The key of a call on `arrays` with scalar arguments `scalars`: the scalars, then per array (shape, dtype,
    device, contiguity, address mod 16); None where the call has no fast path."""
    plain = _plain_tensor_types()
    return None if plain is None else _signature(arrays, scalars, plain, SCALARS)


def aligned(arrays: tuple[Any, ...], alignment: int) -> bool:
    """Whether every array's address is a multiple of `alignment` (a plan's assumption about outputs the op
    allocated: torch's allocators align far more, a pluggable allocator need not)."""
    return all(a.data_ptr() % alignment == 0 for a in arrays)


def current_stream(device: int) -> int:
    """PyTorch's current CUstream on `device` (the caller has CUDA tensors, so torch is imported)."""
    return int(sys.modules["torch"]._C._cuda_getCurrentRawStream(device))


class Decisions:
    """One op's decisions by signature."""

    def __init__(self) -> None:
        self._by_signature: dict[Hashable, Any] = {}

    def __len__(self) -> int:
        return len(self._by_signature)

    def get(self, key: Hashable | None) -> Any:
        return None if key is None else self._by_signature.get(key)

    def put(self, key: Hashable | None, decision: Any) -> None:
        """Keeps `decision` for `key` (after a checked launch with it succeeded); None keys are not kept."""
        if key is None:
            return
        if len(self._by_signature) >= MAX_SIGNATURES:
            self._by_signature.clear()
        self._by_signature[key] = decision

    def clear(self) -> None:
        self._by_signature.clear()
