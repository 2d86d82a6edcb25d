"""What the BatchNorm2d NCHW ops share: argument checks (the scalars' and the arrays'), the problem they describe,
the eps a kernel receives, and for verification the per-channel statistics of the reference and test inputs."""

from __future__ import annotations

from typing import Any

import numpy as np

from rust_kernels import arrays
from rust_kernels.dtypes import DTYPES
from rust_kernels.errors import ArgumentError
from rust_kernels.kernels import Kernel
from rust_kernels.launch import check_backend
from rust_kernels.runtime import Input, Problem, Scalar

Shape4 = tuple[int, int, int, int]


def expect_shape(name: str, a: Any, shape: tuple[int, ...]) -> None:
    if getattr(a, "shape", None) != shape:
        raise ArgumentError(f"{name}: expected shape {shape}, got {tuple(getattr(a, 'shape', ()))}")


def nchw(name: str, x: Any) -> Shape4:
    shape = getattr(x, "shape", None)
    if shape is None or len(shape) != 4:
        raise ArgumentError(f"{name}: expected an NCHW array (4 dimensions), got shape {shape}")
    b, c, h, w = map(int, shape)
    return b, c, h, w


# Mixed precision, as torch.autocast runs batch norm: bf16/f16 activations with f32 parameters and statistics. In
# test and bench dtype keys, "bf16-f32" names that pairing; a plain name is one dtype for everything.
MIXED = {"bf16-f32": ("bf16", "f32"), "f16-f32": ("f16", "f32")}
DTYPE_KEYS = ("f32", "f64", "bf16", "f16", *MIXED)


def split_key(key: str) -> tuple[str, str]:
    """(activation dtype, parameter dtype) of a dtype key."""
    return MIXED.get(key, (key, key))


def unit_elements(vectorized: int, dtype: str) -> int:
    """Elements the vectorized kernels move at once: one, or a 16-byte (vectorized 1, 3: the NCHW elementwise
    kernels' packs over the flat tensor, and 4: the NCHW reductions' over groups of channels) or 8-byte (2) pack."""
    return {0: 1, 1: 16, 2: 8, 3: 16, 4: 16}[vectorized] // (1 if vectorized == 0 else DTYPES[dtype].size)


def vector_mode(hw: int, dtype: str, alignment: int) -> int:
    """The widest pack that divides every row (H*W elements) and the pointers' alignment, if it holds 2+ lanes."""
    for mode, nbytes in ((1, 16), (2, 8)):
        lanes = unit_elements(mode, dtype)
        if alignment % nbytes == 0 and lanes >= 2 and hw % lanes == 0:
            return mode
    return 0


def check_inputs(
    x_name: str, shape: Shape4, same: dict[str, Any], per_channel: dict[str, Any], backend: str
) -> tuple[str, str]:
    """Checks shapes and dtypes against x (`same`: arrays shaped like x, `per_channel`: [C] arrays); returns the
    activations' and the parameters' dtype names: x's for both (also where there are no [C] arrays), or f32
    parameters for bf16/f16 x (autocast's pairing)."""
    check_backend(backend)
    channels = shape[1]
    for name, a in same.items():
        expect_shape(name, a, shape)
    for name, a in per_channel.items():
        expect_shape(name, a, (channels,))
    dtype = arrays.dtype_name(next(iter(same.values())))
    if dtype not in DTYPES:
        raise ArgumentError(f"{x_name}: expected a floating dtype among {sorted(DTYPES)}, got {dtype}")
    for name, a in same.items():
        if arrays.dtype_name(a) != dtype:
            raise ArgumentError(f"{name}: expected dtype {dtype} like {x_name}, got {arrays.dtype_name(a)}")
    if not per_channel:  # no parameters: their dtype is the activations'
        return dtype, dtype
    first_name, first = next(iter(per_channel.items()))
    param = arrays.dtype_name(first)
    allowed = {dtype, "f32"} if DTYPES[dtype].acc == "f32" and dtype != "f32" else {dtype}
    if param not in allowed:
        raise ArgumentError(
            f"{first_name}: expected dtype {' or '.join(sorted(allowed))} with {x_name} in {dtype}, got {param}"
        )
    for name, a in per_channel.items():
        if arrays.dtype_name(a) != param:
            raise ArgumentError(f"{name}: expected dtype {param} like {first_name}, got {arrays.dtype_name(a)}")
    return dtype, param


def check_eps(eps: object) -> float:
    if isinstance(eps, bool) or not isinstance(eps, int | float | np.floating | np.integer) or not eps >= 0:
        raise ArgumentError(f"eps: expected a non-negative number, got {eps!r}")
    return float(eps)


def check_flag(name: str) -> Any:
    def check(value: object) -> bool:
        if not isinstance(value, bool):
            raise ArgumentError(f"{name}: expected True or False, got {value!r}")
        return value

    return check


def check_block(block_hw: object) -> int | None:
    if block_hw is not None and (isinstance(block_hw, bool) or not isinstance(block_hw, int | np.integer)):
        raise ArgumentError(f"block_hw: expected None or an int (a power of two), got {block_hw!r}")
    return None if block_hw is None else int(block_hw)


def check_momentum(momentum: object) -> float:
    if isinstance(momentum, bool) or not isinstance(momentum, int | float | np.floating):
        raise ArgumentError(f"momentum: expected a number, got {momentum!r}")
    return float(momentum)


EPS = Scalar("eps", 1e-5, check_eps, "float")
BLOCK_HW = Scalar("block_hw", None, check_block, "int?")
DETERMINISTIC = Scalar("deterministic", True, check_flag("deterministic"), "bool")
TRAINING = Scalar("training", False, check_flag("training"), "bool")
MOMENTUM = Scalar("momentum", 0.1, check_momentum, "float")
# The per-channel inputs of a forward, whose alignment (Op.coefficients) lets the channels_last eval forwards load a
# thread's coefficients in packs as wide as x's.
PARAMETERS = ("weight", "bias", "running_mean", "running_var")
STATISTICS = (Input("running_mean"), Input("running_var"))
MUTATED_STATISTICS = (Input("running_mean", mutated=True), Input("running_var", mutated=True))  # training updates them


CHANNELS_LAST = (0, 2, 3, 1)  # the dimension order of a channels_last array in memory (NHWC)


def _strides(a: Any) -> tuple[int, ...]:
    return tuple(a.stride()) if arrays.is_torch(a) else tuple(s // a.itemsize for s in a.strides)


def memory_order(x_name: str, same: dict[str, Any]) -> tuple[int, ...] | None:
    """None where x is C-contiguous (NCHW), CHANNELS_LAST where it is channels_last (an NHWC buffer behind the NCHW
    shape: torch.channels_last, or a transposed NumPy array); the other arrays shaped like x must be as x is."""
    x = same[x_name]
    order = next((o for o in (None, CHANNELS_LAST) if arrays.contiguous_in(x, o or (0, 1, 2, 3))), False)
    if order is False:
        raise ArgumentError(f"{x_name}: expected a contiguous NCHW or channels_last array, got strides {_strides(x)}")
    for name, a in same.items():
        if not arrays.contiguous_in(a, order or (0, 1, 2, 3)):
            layout = "channels_last" if order else "contiguous NCHW"
            raise ArgumentError(f"{name}: expected a {layout} array like {x_name}, got strides {_strides(a)}")
    return order


def both_layouts(shape: Shape4) -> bool:
    """Whether NCHW memory of `shape` is NHWC memory too (H*W = 1, C > 1: each image one row of C), so that an NCHW
    call may run the channels_last kernels, which read such rows coalesced where the NCHW ones read a channel's
    values C apart."""
    return shape[2] * shape[3] == 1 and shape[1] > 1


def layouts(shape: Shape4, channels_last: bool) -> tuple[bool, ...]:
    """The memory formats (channels_last or not) whose kernels may run a call in `channels_last`: its own, and where
    H*W = 1 (both_layouts) the other too."""
    return (channels_last, not channels_last) if both_layouts(shape) else (channels_last,)


def nhwc_rule(shape: Shape4, dtype: str, min_bytes: int) -> bool:
    """Whether the rule of an NCHW call (eval or training) runs the channels_last kernels: both layouts, x of
    `min_bytes` or more (below, the NCHW kernels' smaller fixed cost wins; measured on an H100,
    docs/results/h100-2026-12-06-hw1/)."""
    return both_layouts(shape) and shape[0] * shape[1] * DTYPES[dtype].size >= min_bytes


def native_orders(scalars: dict[str, Any]) -> tuple[tuple[int, ...], ...]:
    """The memory orders besides NCHW the torch-native ops read: channels_last, in both modes."""
    return (CHANNELS_LAST,)


def acc_dtype(dtype: str) -> str:
    """The accumulation type of activations in `dtype`: what batch statistics are saved in (f32 for bf16/f16)."""
    return DTYPES[dtype].acc


def describe(op: str, x_name: str, same: tuple[str, ...], per_channel: tuple[str, ...],
             saved: tuple[str, ...] = (), part: bool = False, eval_channels_last: bool = False) -> Any:  # fmt: skip
    """Op `op`'s `describe`: x (NCHW shape; NCHW or, in training mode or with `eval_channels_last`, channels_last in
    memory) and the arrays shaped like it (`same`), the [C] arrays (`per_channel`) and, in training mode, the saved
    batch statistics (`saved`: [C] in the accumulation type), their dtypes (check_inputs); the kernel arguments B,
    C, HW, eps, momentum and count (B * H * W). `part`: an op of SyncBatchNorm's, over one rank's part of the batch:
    training mode, whose part may hold a single value per channel (or none). Runs on fake tensors too
    (torch.compile's tracing): only shapes, strides and dtypes are read."""

    def problem(named: dict[str, Any], scalars: dict[str, Any], backend: str) -> Problem:
        training = part or scalars.get("training", False)
        shape = nchw(x_name, named[x_name])
        shaped = {n: named[n] for n in same}
        dtype, param = check_inputs(x_name, shape, shaped, {n: named[n] for n in per_channel}, backend)
        batches, channels, height, width = shape
        count = batches * height * width
        if count >= 2**32:
            raise ArgumentError(f"{x_name}: B * H * W = {count} exceeds the kernels' 32-bit per-channel indexing")
        order = memory_order(x_name, shaped)
        if order is not None and not training and not eval_channels_last:
            raise ArgumentError(f"{x_name}: channels_last arrays are not read by {op} (its kernels are NCHW): pass "
                                "x.contiguous(), or call the torch-native op (batch_norm_2d_forward or "
                                "batch_norm_2d_backward), which reads them")  # fmt: skip
        if training:
            if count == 1 and not part:
                raise ArgumentError(f"{x_name}: training mode needs more than 1 value per channel, got input size "
                                    f"{list(shape)}")  # fmt: skip
            for name in saved:
                if named[name] is None:
                    raise ArgumentError(f"{name}: training mode needs the forward's saved batch statistics, got None")
                expect_shape(name, named[name], (channels,))
                got = arrays.dtype_name(named[name])
                if got != acc_dtype(dtype):
                    raise ArgumentError(f"{name}: expected the saved batch statistics in {acc_dtype(dtype)} (the "
                                        f"accumulation type of {dtype}), got {got}")  # fmt: skip
        values = {"B": batches, "C": channels, "HW": height * width, "eps": scalars.get("eps", 0.0),
                  "momentum": scalars.get("momentum", 0.0), "count": float(count)}  # fmt: skip
        return Problem(shape, dtype, param, values, scalars, order)

    return problem


def training_mode(describe: Any) -> Any:
    """`describe` of a training-mode op: the problem as the torch-native ops' with training=True."""

    def problem(named: dict[str, Any], scalars: dict[str, Any], backend: str) -> Problem:
        return describe(named, scalars | {"training": True}, backend)

    return problem


def kernel_eps(kernel: Kernel, eps: float) -> float:
    """eps as the kernel receives it: an f32 argument (the seed kernels' ABI) or the accumulation type."""
    eps_type = next(a for a in kernel.args if a[0] == "eps")[1]
    return float(np.float32(eps)) if eps_type == "f32" else eps


def rstd(running_var: np.ndarray, eps: float) -> np.ndarray:
    return 1.0 / np.sqrt(np.asarray(running_var, np.float64) + eps)


def random_inputs(shape: Shape4, key: str, seed: int, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Standard-normal activations and gradients, weights in [0.5, 1.5], biases and means of scale 0.5, variances
    in [0.5, 2], rounded to the storage types of dtype key `key`."""
    rng = np.random.default_rng(seed)
    channels = shape[1]
    draw = {
        "dy": lambda: rng.standard_normal(shape),
        "x": lambda: rng.standard_normal(shape) * 2 + 0.5,
        "weight": lambda: rng.uniform(0.5, 1.5, channels),
        "bias": lambda: rng.standard_normal(channels) * 0.5,
        "running_mean": lambda: rng.standard_normal(channels) * 0.5,
        "running_var": lambda: rng.uniform(0.5, 2.0, channels),
    }
    activations, parameters = (DTYPES[d].numpy_dtype() for d in split_key(key))
    return {name: draw[name]().astype(activations if name in ("dy", "x") else parameters) for name in names}


def gamma(u: float, n: int) -> float:
    """Higham's gamma_n = n u / (1 - n u): the relative error bound of n roundings."""
    return n * u / (1 - n * u)


def floor(dtype: str) -> float:
    """Absolute floor of a tolerance: underflow in the accumulation type and rounding to a subnormal of storage."""
    info = DTYPES[dtype]
    return float(np.finfo(info.acc_numpy).tiny) * 4 + info.smallest_subnormal
