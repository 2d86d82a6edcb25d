"""BatchNorm2d NCHW backward with frozen running statistics (eval mode): the op, its launch plans, the float64
reference and the tolerance model.

Plans. The kernels move 3 x numel x sizeof(D) bytes, so they are memory-bound: a plan's job is to keep every SM
streaming. One CTA per channel leaves SMs idle when C is small, so each channel is then split over several CTAs
(batch_norm_2d_nchw_backward_split), as long as each keeps enough work; 16- or 8-byte vector accesses are used when
H*W and the pointers allow; channels too small for a CTA (a few thousand single elements) get a warp each
(batch_norm_2d_nchw_backward_warp). The seed kernel (batch_norm_2d_nchw_backward, one CTA per channel) keeps the
original signature.

Tolerances are error bounds derived from the arithmetic, never tuned. With u the unit roundoff of the kernel's
accumulation type (f32 for f32, bf16 and f16 storage; f64 for f64) and u64 = 2^-53 that of the float64 reference:
- dx = weight * rstd * dy: 5 roundings in the kernel (add, sqrt and divide for rstd; two products), bounded with
  second-order terms by 6u |dx|; 5 in the reference, bounded by 6 u64 |dx|.
- Sums: n terms added along a tree of depth d err by at most gamma_d * sum|terms|, gamma_d = d u / (1 - d u)
  (Higham, Accuracy and Stability, 4.2); summation_depth gives d for each plan. dbias: gamma_d * sum|dy|. dweight:
  its terms dy * (x - mean) carry 2 roundings each (gamma_(d+2)), and the final product with rstd (itself 3
  roundings) 4 more: (1 + 5u) rstd gamma_(d+2) sum|dy (x - mean)| + 5u |dweight|. The reference sums with math.fsum
  (one rounding), so its error is its terms' roundings: 3 u64 rstd sum|terms| + 6 u64 |dweight| and 2 u64 sum|dy|.
- Storage: bf16 and f16 results are rounded from the f32 value once more: |fl(y^) - y| <= us |y| + (1 + us) |y^ - y|,
  us = 2^-8 (bf16) or 2^-11 (f16); f32 and f64 results are stored as computed (us = 0).
- An absolute floor covers underflow in the accumulation type and rounding to a subnormal of the storage type.
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
from rust_kernels.errors import ArgumentError
from rust_kernels.families.batch_norm import common
from rust_kernels.kernels import (  # type: ignore[attr-defined]
    BatchNorm2dNchwBackward,
    BatchNorm2dNchwBackwardSplit,
    BatchNorm2dNchwBackwardSplitMixed,
    BatchNorm2dNchwBackwardWarp,
    BatchNorm2dNchwBackwardWarpMixed,
    Kernel,
)
from rust_kernels.launch import load
from rust_kernels.registry import Family, register

MAX_SPLIT = 64
# Channels of at most this many single elements (no packs possible) go to the warp-per-channel kernel. Measured on
# the H200: (32,2048,7,7) f32 20.7 -> 19.0 us, bf16 14.8 -> 14.4 us; with packs, or more elements per channel, a
# CTA per channel is faster.
WARP_MAX_UNITS = 2048
# A CTA that gets less than this many units (elements or packs) spends more on its fixed costs (statistics,
# reductions) than on streaming: 2 unrolled steps of a 128-thread CTA.
MIN_UNITS_PER_CTA = 1024
U64 = 2.0**-53


@dataclass(frozen=True)
class Plan:
    kernel: Kernel
    split: int = 1  # CTAs per channel (split kernel)
    ctas: int = 0  # CTAs in the grid (warp kernel)

    @property
    def kind(self) -> str:
        """ "seed", "split" or "warp" (the mixed-precision variants are kinds of split and warp)."""
        name = self.kernel.name.removeprefix(BatchNorm2dNchwBackward.spec.name).removeprefix("_")
        return name.removesuffix("_mixed") or "seed"

    @property
    def label(self) -> str:
        return self.kernel.id + {"split": f" split={self.split}", "warp": f" ctas={self.ctas}"}.get(self.kind, "")

    def grid(self, channels: int) -> tuple[int, int, int]:
        return (self.ctas, 1, 1) if self.kind == "warp" else (channels, self.split, 1)


def _variants(mixed: bool) -> tuple[type[Kernel], type[Kernel]]:
    """The split and warp kernels: for one dtype, or for bf16/f16 activations with f32 parameters."""
    if mixed:
        return BatchNorm2dNchwBackwardSplitMixed, BatchNorm2dNchwBackwardWarpMixed
    return BatchNorm2dNchwBackwardSplit, BatchNorm2dNchwBackwardWarp


@cache  # a pure function of its arguments: the op asks it on every call
def choose(
    shape: common.Shape4,
    dtype: str,
    alignment: int,
    sms: int,
    deterministic: bool = True,
    block_hw: int | None = None,
    mixed: bool = False,
) -> Plan:
    """The plan for an NCHW shape; `alignment`: a power of two (at most 16) dividing the addresses of dy, x, dx;
    `mixed`: f32 parameters with bf16/f16 activations."""
    batches, channels, height, width = shape
    hw = height * width
    if batches * hw >= 2**32:
        raise ArgumentError(f"x: B * H * W = {batches * hw} exceeds the kernel's 32-bit per-channel indexing")
    vectorized = common.vector_mode(hw, dtype, alignment)
    units = batches * hw // common.unit_elements(vectorized, dtype)
    if vectorized == 0 and units <= WARP_MAX_UNITS:
        return warp(channels, block_hw or 128, 0, dtype, mixed)
    # Measured on the H200 (bench and a sweep of block x split per shape): with C of 1.5 CTAs per SM or more, one
    # CTA per channel is best; fewer channels are split until there are about 2 CTAs per SM, as long as each CTA
    # keeps enough work. Bigger CTAs pay off only when each has a lot to stream.
    split = 1
    if channels < sms * 3 // 2:
        while split < MAX_SPLIT and channels * split < 2 * sms and units // (2 * split) >= MIN_UNITS_PER_CTA:
            split *= 2
    per_cta = units // split
    block = block_hw or (512 if per_cta >= 16384 else 256 if per_cta >= 4096 else 128)
    return Plan(_variants(mixed)[0](block, vectorized, int(deterministic), dtype=dtype), split)


def warp(channels: int, block_hw: int, vectorized: int, dtype: str, mixed: bool = False) -> Plan:
    """The warp-per-channel kernel, with a warp for every channel."""
    kernel = _variants(mixed)[1](block_hw, vectorized, dtype=dtype)
    return Plan(kernel, ctas=max(1, -(-channels // (block_hw // 32))))


def seed(block_hw: int, dtype: str) -> Plan:
    """The original kernel: one CTA per channel."""
    return Plan(BatchNorm2dNchwBackward(block_hw=block_hw, dtype=dtype))


def own_plan(
    shape: common.Shape4,
    dtype: str,
    streamed: tuple[Any, ...],
    backend: str,
    device: int,
    deterministic: bool = True,
    block_hw: int | None = None,
    mixed: bool = False,
) -> Plan:
    """The op's choice for arrays `streamed` (dy, x, and dx where it exists) on `backend`'s device."""
    alignment, sms = common.placement(streamed, backend, device)
    block = None if block_hw is None else int(block_hw)
    return choose(shape, dtype, alignment, sms, deterministic, block, mixed)


# --- the op -----------------------------------------------------------------------------------------------------------
# Split-kernel workspaces, per (library, device, stream, dtype, mode): every launch leaves them zeroed again, and
# launches on one stream are ordered, so one workspace per stream is never used by two launches at once.
_workspaces: dict[tuple, tuple[Any, Any, int, int]] = {}  # partials, counters and their lengths
_fast = calls.fast_calls()
# The kernels' eight arrays (dy, x, dx, weight, running_mean, running_var, dweight, dbias) as the fast path takes
# them: inputs (dy, x, weight, running_mean, running_var) by index, outputs dx, dweight, dbias as -1, -2, -3,
# allocated like x, weight and weight.
_LAYOUT = (0, 1, -1, 2, 3, 4, -2, -3)
_OUTPUTS_LIKE = (1, 2, 2)


@cache
def _loaded(kernel: Kernel, device: int, backend: str) -> Any:
    return load(kernel, device=device, backend=backend)


def _tail(plan: Plan, shape: common.Shape4, like: Any, device: int, stream: int, eps: float) -> tuple[Any, ...]:
    """The kernel's arguments after its eight arrays: the split kernel's workspace, then the scalars."""
    batches, channels, height, width = shape
    kind, kernel = plan.kind, plan.kernel
    scalars = (batches, channels, height * width, common.kernel_eps(kernel, eps))
    if kind == "warp":
        return (*scalars, plan.ctas)
    if kind != "split":
        return scalars
    deterministic = kernel.deterministic == 1
    need = channels * (plan.split if deterministic else 1) * 2
    partials, counters = _workspace(like, kernel.dtype_info.acc, deterministic, need, channels, device, stream)
    return (partials, counters, *scalars, plan.split)


def _workspace(like: Any, acc: str, deterministic: bool, need: int, channels: int, device: int, stream: int
               ) -> tuple[Any, Any]:  # fmt: skip
    """(partials, counters) for a split launch on CUstream `stream`: zero before the launch, and zero after it."""
    if isinstance(like, np.ndarray):  # host: fresh and cheap
        return arrays.zeros(like, need, acc), arrays.zeros(like, channels, "u32")
    key = (type(like).__module__, device, stream, acc, deterministic)
    held = _workspaces.get(key)
    if held is None or held[2] < need or held[3] < channels:
        held = (arrays.zeros(like, need, acc), arrays.zeros(like, channels, "u32"), need, channels)
        _workspaces[key] = held
    return held[0], held[1]


def fast_call(dy: Any, x: Any, weight: Any, running_mean: Any, running_var: Any, eps: float
              ) -> tuple[Any, Any, Any] | None:  # fmt: skip
    """The op's fast path alone (deterministic, the plan's own block), on the current stream: (dx, dweight, dbias)
    where the call's signature was decided before, else None (then call the op). For callers that would otherwise
    prepare arguments first (rust_kernels.torch)."""
    return _fast((dy, x, weight, running_mean, running_var), (eps, None, True))  # type: ignore[no-any-return]


def batch_norm_2d_nchw_backward(
    dy: Any,
    x: Any,
    weight: Any,
    running_mean: Any,
    running_var: Any,
    eps: float = 1e-5,
    block_hw: int | None = None,
    backend: str = "cuda",
    stream: Any = None,
    deterministic: bool = True,
    plan: Plan | None = None,
) -> tuple[Any, Any, Any]:
    """(dx, dweight, dbias) of BatchNorm2d over NCHW `x` with frozen running statistics. dy and x share a dtype;
    weight and the statistics have it too, or f32 with bf16/f16 activations (torch.autocast's pairing), and dweight
    and dbias come in the parameters' dtype. f32 accumulation for f32, bf16 and f16.

    The launch plan is chosen per shape (`block_hw` fixes its CTA size). The CTAs sharing a channel combine their
    partial sums in a fixed order, so results are bit-identical run to run; `deterministic=False` combines them with
    float atomics instead. `plan` overrides the choice. Empty inputs give empty dx and zero dweight, dbias.
    Launches go to `stream`, by default the current stream of the arrays' library."""
    inputs, scalars = (dy, x, weight, running_mean, running_var), (eps, block_hw, deterministic)
    fast = backend == "cuda" and plan is None
    if fast:  # a signature checked and decided before launches in one native call (PyTorch CUDA tensors)
        outputs = _fast(inputs, scalars, None if stream is None else driver.stream_handle(stream))
        if outputs is not None:
            return outputs  # type: ignore[no-any-return]
    shape = common.nchw("x", x)
    channels = shape[1]
    dtype, param = common.check_inputs(
        "x", shape, {"x": x, "dy": dy}, {"weight": weight, "running_mean": running_mean, "running_var": running_var},
        backend,
    )  # fmt: skip
    eps = common.check_eps(eps)
    if not isinstance(deterministic, bool):
        raise ArgumentError(f"deterministic: expected True or False, got {deterministic!r}")
    if block_hw is not None and (isinstance(block_hw, bool) or not isinstance(block_hw, int | np.integer)):
        raise ArgumentError(f"block_hw: expected an int (a power of two), got {block_hw!r}")
    device = 0 if backend == "host" else arrays.device_of(x)
    dx = arrays.empty(x, shape)
    if math.prod(shape) == 0:  # nothing to launch: PyTorch's results for an empty batch
        return dx, arrays.zeros(x, channels, param), arrays.zeros(x, channels, param)
    dweight, dbias = arrays.empty(weight, (channels,)), arrays.empty(weight, (channels,))
    if plan is None:
        plan = own_plan(shape, dtype, (dy, x, dx), backend, device, deterministic, block_hw, param != dtype)
    loaded, grid = _loaded(plan.kernel, device, backend), plan.grid(channels)
    handle = common.stream_of(backend, device, x, stream)
    tail = _tail(plan, shape, x, device, handle, eps)
    loaded.launch(grid, plan.kernel.block_dim, (dy, x, dx, weight, running_mean, running_var, dweight, dbias, *tail),
                  stream=handle)  # fmt: skip
    if fast and loaded.checked is not None:
        _fast.remember(inputs, scalars, handle, loaded.checked, grid, _OUTPUTS_LIKE, _LAYOUT, tail)
    return dx, dweight, dbias


def batch_norm_2d_backward(
    dy: Any,
    x: Any,
    weight: Any,
    running_mean: Any,
    running_var: Any,
    save_mean: Any = None,
    save_invstd: Any = None,
    training: bool = False,
    eps: float = 1e-5,
    backend: str = "cuda",
    stream: Any = None,
    deterministic: bool = True,
) -> tuple[Any, Any, Any]:
    """(dx, dweight, dbias), as torch.ops.aten.native_batch_norm_backward for NCHW x with output_mask all True.
    Eval mode uses the running statistics (save_mean and save_invstd, empty in eval mode, are not read);
    training=True raises NotImplementedError until the training-mode kernels land."""
    common.check_eval_mode("batch_norm_2d_backward", training)
    return batch_norm_2d_nchw_backward(dy, x, weight, running_mean, running_var, eps, backend=backend, stream=stream,
                                       deterministic=deterministic)  # fmt: skip


# --- the family: reference, tolerances, checks, bench -------------------------------------------------------------
class Backward(Family):
    name = "batch_norm_2d_nchw_backward"
    kernels = ("batch_norm_2d_nchw_backward", "batch_norm_2d_nchw_backward_split", "batch_norm_2d_nchw_backward_warp",
               "batch_norm_2d_nchw_backward_split_mixed", "batch_norm_2d_nchw_backward_warp_mixed")  # fmt: skip
    dtypes = common.DTYPE_KEYS
    outputs = ("dx", "dweight", "dbias")
    suites = {  # noqa: RUF012
        "cuda": [(2, 3, 5, 7), (4, 8, 17, 19), (16, 8, 1, 1), (1, 16, 32, 32), (8, 1, 28, 28), (2, 4, 256, 256),
                 (32, 64, 28, 28), (3, 5, 1, 1031), (3, 4, 6, 7), (4, 16, 14, 14)],
        "host": [(2, 3, 5, 7), (4, 8, 17, 19), (16, 8, 1, 1), (1, 4, 32, 32), (8, 1, 28, 28), (1, 2, 128, 128),
                 (2, 3, 6, 7), (2, 5, 14, 14)],
    }  # fmt: skip
    bench_shapes = [(32, 256, 56, 56), (32, 64, 112, 112), (256, 64, 28, 28), (64, 512, 28, 28),  # noqa: RUF012
                    (32, 1024, 14, 14), (128, 128, 56, 56), (32, 2048, 7, 7), (8, 32, 8, 8)]  # fmt: skip
    ops = {  # noqa: RUF012
        "batch_norm_2d_nchw_backward": batch_norm_2d_nchw_backward,
        "batch_norm_2d_backward": batch_norm_2d_backward,
    }
    torch_schemas = {  # noqa: RUF012
        "batch_norm_2d_backward": "(Tensor dy, Tensor x, Tensor weight, Tensor running_mean, Tensor running_var, "
        "Tensor? save_mean=None, Tensor? save_invstd=None, bool training=False, float eps=1e-05) "
        "-> (Tensor, Tensor, Tensor)"
    }
    eps = 1e-5
    # CTA sizes and splits each check covers; "every": every CTA size of every kernel (the sanitizer's run).
    seed_blocks = {"cuda": (32, 256, 1024), "host": (32, 256, 1024), "every": (32, 64, 128, 256, 512, 1024)}  # noqa: RUF012
    variant_blocks = {"cuda": (128, 512), "host": (128,), "every": (128, 256, 512)}  # noqa: RUF012
    splits = {"cuda": (1, 3, 16), "host": (1, 3), "every": (1, 3, 16)}  # noqa: RUF012

    def inputs_key(self, plan: Plan) -> str:  # type: ignore[override]
        return common.plan_key(plan.kernel)

    def inputs(self, shape: tuple[int, ...], dtype: str, seed: int = 0) -> dict[str, np.ndarray]:
        names = ("dy", "x", "weight", "running_mean", "running_var")
        return common.random_inputs(shape, dtype, seed, names)  # type: ignore[arg-type]

    def reference(self, inputs: dict[str, np.ndarray], plan: Plan) -> tuple[np.ndarray, ...]:
        """(dx, dweight, dbias) in float64; sums by math.fsum (correctly rounded). eps as the kernel receives it."""
        dy, x = (np.asarray(inputs[n], np.float64) for n in ("dy", "x"))
        weight, mean = (np.asarray(inputs[n], np.float64) for n in ("weight", "running_mean"))
        rstd = common.rstd(inputs["running_var"], common.kernel_eps(plan.kernel, self.eps))
        per_channel = (slice(None), None, None)
        dx = (weight * rstd)[per_channel] * dy
        batches, channels, height, width = dy.shape
        per_channel_shape = (channels, batches * height * width)  # not (channels, -1): C may be 0
        terms = (dy * (x - mean[per_channel])).transpose(1, 0, 2, 3).reshape(per_channel_shape)
        dys = dy.transpose(1, 0, 2, 3).reshape(per_channel_shape)
        dweight = np.array([math.fsum(row) for row in terms]) * rstd
        dbias = np.array([math.fsum(row) for row in dys])
        return dx, dweight, dbias

    def plans(self, backend: str, shape: tuple[int, ...], dtype: str) -> list[Plan]:
        """The seed kernel at three CTA sizes; the split kernel in each mode with and without splitting; the warp
        kernel with a warp per channel and with one CTA striding over all channels (vectorized variants only where
        their packs divide H*W). Mixed keys (bf16-f32) check the mixed-precision variants."""
        mixed = dtype in common.MIXED
        dtype = common.split_key(dtype)[0]
        split_class, warp_class = _variants(mixed)
        out = [] if mixed else [seed(block, dtype) for block in self.seed_blocks[backend]]
        hw = shape[2] * shape[3]
        for block in self.variant_blocks[backend]:
            for vectorized in (0, 1, 2):
                if hw % common.unit_elements(vectorized, dtype):
                    continue  # its packs do not divide a row
                for det in (0, 1):
                    kernel = split_class(block, vectorized, det, dtype=dtype)
                    out += [Plan(kernel, split) for split in self.splits[backend]]
                out += [warp(shape[1], block, vectorized, dtype, mixed)]
                out += [Plan(warp_class(block, vectorized, dtype=dtype), ctas=1)]
        return out

    def run(self, plan: Plan | None, arrays: dict[str, Any], backend: str) -> tuple[Any, ...]:
        names = ("dy", "x", "weight", "running_mean", "running_var")
        return batch_norm_2d_nchw_backward(*(arrays[n] for n in names), eps=self.eps, backend=backend, plan=plan)

    def choose(self, data: dict[str, Any], backend: str) -> Plan:
        """The op's plan: dx, which it allocates, is aligned to 16 bytes or more by every library's allocator."""
        x = data["x"]
        device = 0 if backend == "host" else arrays.device_of(x)
        dtype, mixed = arrays.dtype_name(x), arrays.dtype_name(data["weight"]) != arrays.dtype_name(x)
        return own_plan(common.nchw("x", x), dtype, (data["dy"], x), backend, device, mixed=mixed)

    def tolerances(
        self, plan: Plan, shape: tuple[int, ...], inputs: dict[str, np.ndarray], ref: tuple[np.ndarray, ...]
    ) -> list[np.ndarray]:
        dtype = plan.kernel.dtype
        dy, x, var, mean = (np.asarray(inputs[n], np.float64) for n in ("dy", "x", "running_var", "running_mean"))
        u = DTYPES[dtype].unit_roundoff
        # dx is stored in the activations' type, dweight and dbias in the parameters' (f32 for mixed kernels).
        param = common.split_key(common.plan_key(plan.kernel))[1]
        storage = [DTYPES[d].storage_roundoff for d in (dtype, param, param)]
        depth = summation_depth(plan, shape)
        rstd = common.rstd(var, common.kernel_eps(plan.kernel, self.eps))
        abs_dy = np.abs(dy).sum(axis=(0, 2, 3))
        abs_terms = np.abs(dy * (x - mean[:, None, None])).sum(axis=(0, 2, 3))
        dx, dweight, dbias = (np.abs(r) for r in ref)
        kernel = [
            6 * u * dx,
            (1 + 5 * u) * rstd * common.gamma(u, depth + 2) * abs_terms + 5 * u * dweight,
            common.gamma(u, depth) * abs_dy,
        ]
        reference = [6 * U64 * dx, 3 * U64 * rstd * abs_terms + 6 * U64 * dweight, 2 * U64 * abs_dy]
        tiny = common.floor(dtype)
        return [
            (1 + us) * k + us * r + e + tiny
            for us, k, r, e in zip(storage, kernel, (dx, dweight, dbias), reference, strict=True)
        ]

    def moved_bytes(self, shape: tuple[int, ...], dtype: str) -> int:
        """Read dy and x, write dx."""
        return 3 * math.prod(shape) * DTYPES[common.split_key(dtype)[0]].size

    def bench_calls(self, tensors: dict[str, Any]) -> dict[str, Callable[[], Any]]:
        import torch

        import rust_kernels.torch  # noqa: F401 (defines torch.ops.rust_kernels)

        dy, x, weight, mean, var = (tensors[n] for n in ("dy", "x", "weight", "running_mean", "running_var"))
        # 0-element save_mean/save_invstd (train=False): PyTorch's CUDA kernel reads them in its accumulation type
        # (float32 for bf16/f16 inputs, else the input's), its CPU kernel in the input's dtype.
        acc = x.dtype if x.device.type == "cpu" or x.dtype == torch.float64 else torch.float32
        empty = torch.empty(0, device=x.device, dtype=acc)
        dx = torch.empty_like(x)

        def torch_eager() -> Any:
            return torch.ops.aten.native_batch_norm_backward(
                dy, x, weight, mean, var, empty, empty, False, self.eps, [True, True, True]
            )

        def maths(dy: Any, x: Any, weight: Any, mean: Any, var: Any) -> Any:
            rstd = torch.rsqrt(var.float() + self.eps)
            xhat = (x.float() - mean.float()[:, None, None]) * rstd[:, None, None]
            dyf = dy.float()
            dx = (dyf * (weight.float() * rstd)[:, None, None]).to(x.dtype)
            return dx, (dyf * xhat).sum((0, 2, 3)).to(x.dtype), dyf.sum((0, 2, 3)).to(x.dtype)

        compiled = torch.compile(maths, dynamic=False)
        return {
            "ours": lambda: batch_norm_2d_nchw_backward(dy, x, weight, mean, var, eps=self.eps),
            "ours_atomic": lambda: batch_norm_2d_nchw_backward(dy, x, weight, mean, var, eps=self.eps,
                                                               deterministic=False),
            "ours_op": lambda: torch.ops.rust_kernels.batch_norm_2d_backward(dy, x, weight, mean, var),
            "torch": torch_eager,
            "compile": lambda: compiled(dy, x, weight, mean, var),
            "bound": lambda: torch.add(x, dy, out=dx),
        }  # fmt: skip


def summation_depth(plan: Plan, shape: tuple[int, ...]) -> int:
    """The longest chain of additions behind a channel sum: each thread's sequential terms, 5 butterfly levels
    within a warp and 5 over the warps; for a split plan also the partials (one per CTA of the channel, added in a
    chain by float atomics in the worst case) and a second 10-level block reduction."""
    batches, _, height, width = shape
    block = plan.kernel.block_dim[0]
    if plan.kind == "seed":
        return batches * math.ceil(height * width / block) + 10
    if plan.kind == "warp":  # each lane walks the channel with a stride of 32, then 5 butterfly levels
        return math.ceil(batches * height * width / 32) + 16 + 5
    elements = math.ceil(batches * height * width / plan.split)
    per_thread = math.ceil(elements / block) + 16  # + one pack's lanes, where a slice ends inside a stride
    return per_thread + 10 + plan.split + 10


FAMILY = register(Backward())
