"""BatchNorm2d NCHW forward in inference mode (frozen running statistics): the op, its plan, the float64 reference
and the tolerance model.

y = (x - mean) * scale + bias with scale = weight * rstd, rstd = 1 / sqrt(var + eps). With u the accumulation type's
unit roundoff: rstd carries 3 roundings and scale 1 more, (x - mean) 1 and the product 1, so t = (x - mean) * scale
is within gamma_6 |t|; the final add rounds once: |y^ - y| <= gamma_6 |t| + u (1 + gamma_6)(|t| + |bias|), bounded
by 8u (|t| + |bias|). The float64 reference errs by the same count in u64. bf16/f16 storage adds us |y|.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from rust_kernels import arrays, calls, driver
from rust_kernels.dtypes import DTYPES
from rust_kernels.families.batch_norm import common
from rust_kernels.kernels import (  # type: ignore[attr-defined]
    BatchNorm2dNchwForwardInference,
    BatchNorm2dNchwForwardInferenceFlat,
    BatchNorm2dNchwForwardInferenceFlatMixed,
    BatchNorm2dNchwForwardInferenceMixed,
    Kernel,
)
from rust_kernels.launch import load
from rust_kernels.registry import Family, register

U64 = 2.0**-53


@dataclass(frozen=True)
class Plan:
    kernel: Kernel
    ctas: int = 0  # CTAs in the grid (flat kernel)

    @property
    def flat(self) -> bool:
        return "_flat" in self.kernel.name

    @property
    def label(self) -> str:
        return self.kernel.id + (f" ctas={self.ctas}" if self.flat else "")


MAX_GRID_Y = 65535  # the seed kernel's batch is grid y: larger batches launch in chunks
FLAT_BLOCK = 256
WAVES = 4  # the flat kernel's grid: at most this many waves of full SMs, each thread then strides on
LISTED_SMS = 132  # the H200's SMs, for the grids of the plans checks list (listed without asking a device)


def seed(hw: int, dtype: str, block_hw: int | None = None, mixed: bool = False) -> Plan:
    """The original kernel, a CTA per (b, c) row: about four elements per thread, from 32 to 512 threads."""
    block = block_hw or min(512, max(32, 1 << max(0, math.ceil(hw / 4) - 1).bit_length()))
    kind = BatchNorm2dNchwForwardInferenceMixed if mixed else BatchNorm2dNchwForwardInference
    return Plan(kind(block, dtype=dtype))


def flat(shape: common.Shape4, dtype: str, vectorized: int, sms: int, block: int = FLAT_BLOCK, mixed: bool = False
         ) -> Plan:  # fmt: skip
    """The streaming kernel with enough CTAs for every unit, at most WAVES waves of 2048-thread SMs."""
    batches, channels, height, width = shape
    units = batches * channels * height * width // common.unit_elements(vectorized, dtype)
    ctas = max(1, min(-(-units // block), sms * (2048 // block) * WAVES))
    kind = BatchNorm2dNchwForwardInferenceFlatMixed if mixed else BatchNorm2dNchwForwardInferenceFlat
    return Plan(kind(block, vectorized, dtype=dtype), ctas)


@cache  # a pure function of its arguments: the op asks it on every call
def choose(shape: common.Shape4, dtype: str, alignment: int, sms: int, mixed: bool = False) -> Plan:
    """The streaming kernel in the widest pack that the rows and the pointers' `alignment` allow. (The seed
    kernel's grid [C, B] leaves threads idle on small rows and loads one element at a time: measured on the H200
    at 0.23-0.69 of the memory bound, f32.)"""
    vectorized = common.vector_mode(shape[2] * shape[3], dtype, alignment)
    return flat(shape, dtype, vectorized, sms, mixed=mixed)


def own_plan(
    shape: common.Shape4,
    dtype: str,
    streamed: tuple[Any, ...],
    backend: str,
    device: int,
    mixed: bool = False,
    block_hw: int | None = None,
) -> Plan:
    """The op's choice for arrays `streamed` (x, and y where it exists) on `backend`'s device."""
    if block_hw is not None:
        return seed(shape[2] * shape[3], dtype, int(block_hw), mixed)
    alignment, sms = common.placement(streamed, backend, device)
    return choose(shape, dtype, alignment, sms, mixed)


@cache
def _loaded(kernel: Kernel, device: int, backend: str) -> Any:
    return load(kernel, device=device, backend=backend)


_fast = calls.fast_calls()
# The flat kernel's arrays (x, y, weight, bias, running_mean, running_var) as the fast path takes them: inputs (x,
# weight, bias, running_mean, running_var) by index, output y as -1, allocated like x.
_LAYOUT = (0, -1, 1, 2, 3, 4)
_OUTPUTS_LIKE = (0,)


def _launch(plan: Plan, loaded: Any, shape: common.Shape4, inputs: tuple[Any, ...], y: Any, stream: int,
            eps: float) -> tuple[Any, ...] | None:  # fmt: skip
    """Launches `plan` on (x, weight, bias, running_mean, running_var) into y; the flat kernel's scalar arguments
    (what the fast path keeps), None for the seed kernel."""
    x, *parameters = inputs
    batches, channels, height, width = shape
    eps = common.kernel_eps(plan.kernel, eps)
    if plan.flat:
        scalars = (batches, channels, height * width, eps, plan.ctas)
        loaded.launch((plan.ctas, 1, 1), plan.kernel.block_dim, (x, y, *parameters, *scalars), stream=stream)
        return scalars
    for start in range(0, batches, MAX_GRID_Y):  # the seed kernel runs only when asked for (block_hw)
        stop = min(batches, start + MAX_GRID_Y)
        args = (x[start:stop], y[start:stop], *parameters, channels, height * width, eps)
        loaded.launch((channels, stop - start, 1), plan.kernel.block_dim, args, stream=stream)
    return None


def fast_call(x: Any, weight: Any, bias: Any, running_mean: Any, running_var: Any, eps: float) -> Any | None:
    """The op's fast path alone, on the current stream: y where the call's signature was decided before, else None
    (then call the op). For callers that would otherwise prepare arguments first (rust_kernels.torch)."""
    outputs = _fast((x, weight, bias, running_mean, running_var), (eps,))
    return None if outputs is None else outputs[0]


def batch_norm_2d_nchw_forward_inference(
    x: Any,
    weight: Any,
    bias: Any,
    running_mean: Any,
    running_var: Any,
    eps: float = 1e-5,
    block_hw: int | None = None,
    backend: str = "cuda",
    stream: Any = None,
    plan: Plan | None = None,
) -> Any:
    """y = (x - running_mean) * rstd * weight + bias over NCHW `x`, per channel, with frozen statistics. The
    parameters and statistics share x's dtype, or are f32 with bf16/f16 x (torch.autocast's pairing); y has x's.
    The plan streams the tensor in packs; `block_hw` runs the original kernel with that CTA size instead. Launches
    go to `stream`, by default the current stream of the arrays' library."""
    inputs = (x, weight, bias, running_mean, running_var)
    fast = backend == "cuda" and plan is None and block_hw is None
    if fast:  # a signature checked and decided before launches in one native call (PyTorch CUDA tensors)
        outputs = _fast(inputs, (eps,), None if stream is None else driver.stream_handle(stream))
        if outputs is not None:
            return outputs[0]
    shape = common.nchw("x", x)
    dtype, param = common.check_inputs(
        "x", shape, {"x": x},
        {"weight": weight, "bias": bias, "running_mean": running_mean, "running_var": running_var}, backend,
    )  # fmt: skip
    eps = common.check_eps(eps)
    device = 0 if backend == "host" else arrays.device_of(x)
    y = arrays.empty(x, shape)
    if math.prod(shape) == 0:  # (not y.size: a method on torch tensors)
        return y
    if plan is None:
        plan = own_plan(shape, dtype, (x, y), backend, device, param != dtype, block_hw)
    loaded, handle = _loaded(plan.kernel, device, backend), common.stream_of(backend, device, x, stream)
    scalars = _launch(plan, loaded, shape, inputs, y, handle, eps)
    if fast and scalars is not None and loaded.checked is not None:
        _fast.remember(inputs, (eps,), handle, loaded.checked, (plan.ctas, 1, 1), _OUTPUTS_LIKE, _LAYOUT, scalars)
    return y


def batch_norm_2d_forward(
    x: Any,
    weight: Any,
    bias: Any,
    running_mean: Any,
    running_var: Any,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
    backend: str = "cuda",
    stream: Any = None,
) -> tuple[Any, Any, Any]:
    """(y, save_mean, save_invstd), as torch.ops.aten.native_batch_norm for NCHW x. Eval mode (frozen running
    statistics): save_mean and save_invstd are empty, as PyTorch returns them in eval mode. training=True raises
    NotImplementedError until the training-mode kernels land."""
    common.check_eval_mode("batch_norm_2d_forward", training, momentum)
    y = batch_norm_2d_nchw_forward_inference(x, weight, bias, running_mean, running_var, eps, backend=backend,
                                             stream=stream)  # fmt: skip
    return y, arrays.empty(running_mean, (0,)), arrays.empty(running_mean, (0,))  # two arrays: outputs never alias


class ForwardInference(Family):
    name = "batch_norm_2d_nchw_forward_inference"
    kernels = (
        "batch_norm_2d_nchw_forward_inference",
        "batch_norm_2d_nchw_forward_inference_mixed",
        "batch_norm_2d_nchw_forward_inference_flat",
        "batch_norm_2d_nchw_forward_inference_flat_mixed",
    )
    dtypes = common.DTYPE_KEYS
    outputs = ("y",)
    suites = {  # noqa: RUF012
        "cuda": [(2, 3, 5, 7), (4, 8, 17, 19), (16, 8, 1, 1), (1, 16, 32, 32), (32, 64, 28, 28), (3, 5, 1, 1031)],
        "host": [(2, 3, 5, 7), (4, 8, 17, 19), (16, 8, 1, 1), (1, 4, 32, 32), (2, 3, 6, 7)],
    }
    bench_shapes = [(32, 256, 56, 56), (64, 512, 28, 28), (32, 1024, 14, 14), (32, 2048, 7, 7),  # noqa: RUF012
                    (8, 32, 8, 8)]  # fmt: skip
    ops = {  # noqa: RUF012
        "batch_norm_2d_nchw_forward_inference": batch_norm_2d_nchw_forward_inference,
        "batch_norm_2d_forward": batch_norm_2d_forward,
    }
    torch_schemas = {  # noqa: RUF012
        "batch_norm_2d_forward": "(Tensor x, Tensor weight, Tensor bias, Tensor running_mean, Tensor running_var, "
        "bool training=False, float momentum=0.1, float eps=1e-05) -> (Tensor, Tensor, Tensor)"
    }
    eps = 1e-5
    blocks = {"cuda": (32, 128, 1024), "host": (32, 128, 1024), "every": (32, 64, 128, 256, 512, 1024)}  # noqa: RUF012
    flat_blocks = {"cuda": (128, 512), "host": (128,), "every": (128, 256, 512)}  # noqa: RUF012

    def inputs_key(self, plan: Plan) -> str:  # type: ignore[override]
        return common.plan_key(plan.kernel)

    def inputs(self, shape: tuple[int, ...], dtype: str, seed: int = 0) -> dict[str, np.ndarray]:
        names = ("x", "weight", "bias", "running_mean", "running_var")
        return common.random_inputs(shape, dtype, seed, names)  # type: ignore[arg-type]

    def _terms(self, inputs: dict[str, np.ndarray], plan: Plan) -> tuple[np.ndarray, np.ndarray]:
        """t = (x - mean) * weight * rstd and the bias, broadcast per channel, in float64."""
        x, weight, bias, mean = (np.asarray(inputs[n], np.float64) for n in ("x", "weight", "bias", "running_mean"))
        rstd = common.rstd(inputs["running_var"], common.kernel_eps(plan.kernel, self.eps))
        per_channel = (slice(None), None, None)
        return (x - mean[per_channel]) * (weight * rstd)[per_channel], np.broadcast_to(bias[per_channel], x.shape)

    def reference(self, inputs: dict[str, np.ndarray], plan: Plan) -> tuple[np.ndarray, ...]:
        t, bias = self._terms(inputs, plan)
        return (t + bias,)

    def plans(self, backend: str, shape: tuple[int, ...], dtype: str) -> list[Plan]:
        """The seed kernel at several CTA sizes; the flat kernel in every pack that divides H*W, with the op's grid
        and with one CTA striding over everything."""
        storage, mixed = common.split_key(dtype)[0], dtype in common.MIXED
        hw = shape[2] * shape[3]
        out = [seed(hw, storage, block, mixed) for block in self.blocks[backend]]
        for block in self.flat_blocks[backend]:
            for vectorized in (0, 1, 2):
                if hw % common.unit_elements(vectorized, storage) == 0:
                    sms = 1 if backend == "host" else LISTED_SMS
                    own = flat(shape, storage, vectorized, sms, block, mixed)  # type: ignore[arg-type]
                    out += [own, Plan(own.kernel, ctas=1)]
        return out

    def run(self, plan: Plan | None, arrays: dict[str, Any], backend: str) -> tuple[Any, ...]:
        names = ("x", "weight", "bias", "running_mean", "running_var")
        y = batch_norm_2d_nchw_forward_inference(*(arrays[n] for n in names), eps=self.eps, backend=backend, plan=plan)
        return (y,)

    def choose(self, data: dict[str, Any], backend: str) -> Plan:
        x = data["x"]
        device = 0 if backend == "host" else arrays.device_of(x)
        dtype = arrays.dtype_name(x)
        return own_plan(common.nchw("x", x), dtype, (x,), backend, device, arrays.dtype_name(data["weight"]) != dtype)

    def tolerances(
        self, plan: Plan, shape: tuple[int, ...], inputs: dict[str, np.ndarray], ref: tuple[np.ndarray, ...]
    ) -> list[np.ndarray]:
        dtype = plan.kernel.dtype
        u, us = DTYPES[dtype].unit_roundoff, DTYPES[dtype].storage_roundoff
        t, bias = self._terms(inputs, plan)
        magnitude = np.abs(t) + np.abs(bias)
        y = np.abs(ref[0])
        return [(1 + us) * 8 * u * magnitude + us * y + 8 * U64 * magnitude + common.floor(dtype)]

    def moved_bytes(self, shape: tuple[int, ...], dtype: str) -> int:
        """Read x, write y."""
        return 2 * math.prod(shape) * DTYPES[common.split_key(dtype)[0]].size

    def bench_calls(self, tensors: dict[str, Any]) -> dict[str, Callable[[], Any]]:
        import torch

        import rust_kernels.torch  # noqa: F401 (defines torch.ops.rust_kernels)

        x, weight, bias, mean, var = (tensors[n] for n in ("x", "weight", "bias", "running_mean", "running_var"))
        y = torch.empty_like(x)

        def maths(x: Any, weight: Any, bias: Any, mean: Any, var: Any) -> Any:
            scale = weight.float() * torch.rsqrt(var.float() + self.eps)
            return ((x.float() - mean.float()[:, None, None]) * scale[:, None, None] + bias.float()[:, None, None]).to(
                x.dtype
            )

        compiled = torch.compile(maths, dynamic=False)
        return {
            "ours": lambda: batch_norm_2d_nchw_forward_inference(x, weight, bias, mean, var, eps=self.eps),
            "ours_op": lambda: torch.ops.rust_kernels.batch_norm_2d_forward(
                x, weight, bias, mean, var, False, 0.0, self.eps
            ),
            "torch": lambda: torch.nn.functional.batch_norm(x, mean, var, weight, bias, False, 0.0, self.eps),
            "compile": lambda: compiled(x, weight, bias, mean, var),
            "bound": lambda: torch.neg(x, out=y),
        }


FAMILY = register(ForwardInference())
