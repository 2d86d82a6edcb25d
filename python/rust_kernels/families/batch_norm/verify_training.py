"""What verifies BatchNorm2d in training mode (the torch-native ops with training=True, and SyncBatchNorm's per-rank
statistics, batch_norm_2d_moments: the forward's mean and M2), NCHW and channels_last: the inputs, spaces and
layouts, the float64 references and the tolerance models (error bounds derived from the arithmetic, never tuned).
u: the unit roundoff of the accumulation type; u64 = 2^-53, the reference's.

Forward. The kernels accumulate x - K, K the channel's first value (the shift: exact), by Welford batches merged
pairwise (Chan et al.). Every quantity a merge rounds is bounded by S1 = sum|x - K| (means) or S2 = sum (x - K)^2
(M2), each merge rounding a few times, so along a chain of d merges (summation_depth) |mean^ - mean| <=
gamma_(3d) S1 / n + u |mean| (adding K back) and |M2^ - M2| <= gamma_(4d) S2. var = M2 / n (1 rounding); invstd =
1 / sqrt(var + eps) (3): |dinvstd| <= invstd (dvar / (2 (var + eps)) + 4u). y = (x - mean) * (weight * invstd) +
bias: |w| invstd |dmean| + |x - mean| |w| |dinvstd| + 8u (|t| + |bias|), t the product. running_mean =
(1 - m) r + m mean: m |dmean| + 4u (|(1 - m) r| + |m mean|); running_var likewise with the unbiased variance
M2 / (n - 1) (error |dM2| / (n - 1) + 2u of it). Outputs stored in bf16/f16 round once more (us |value|).

Backward. With mean, invstd the saved statistics (inputs), sums along d additions: |dS1| <= gamma_d sum|dy|,
|dS2| <= gamma_(d+2) sum|dy (x - mean)|. dbias = S1; dweight = S2 invstd (+ u). dx = (dy - S1/n) k1 - (x - mean) k2
with k1 = w invstd (1 rounding), k2 = k1 invstd^2 S2 / n (4 more): |k1| (|dS1| / n + u |S1 / n|) + |x - mean|
(|k1| invstd^2 |dS2| / n + 6u |k2|) + 6u (|(dy - S1/n) k1| + |(x - mean) k2|).

The float64 references sum with math.fsum; their own error is bounded by 16 u64 of the same magnitudes.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from rust_kernels import arrays
from rust_kernels.dtypes import DTYPES
from rust_kernels.families.batch_norm import backward, common, forward, sync, training
from rust_kernels.kernels import BatchNorm2dMoments  # type: ignore[attr-defined]
from rust_kernels.reference import fsum_rows
from rust_kernels.registry import Family, Layout, Space
from rust_kernels.runtime import Plan

U64 = 2.0**-53
LISTED_SMS = 132  # the H200's SMs, for the grids of the plans checks list
NCHW, CHANNELS_LAST = Layout("contiguous", (0, 1, 2, 3), True), Layout("channels_last", common.CHANNELS_LAST, True)
SPACES = {
    "host": Space(
        dims=((1, 2, 3), (1, 2, 3, 8), (1, 2, 3, 4, 7, 13), (1, 2, 3, 5, 8, 17, 31)),
        max_log2_elements=12,
        scalars={"eps": (1e-5, 0.0, 1e-3, 1.0), "momentum": (0.1, 0.0, 1.0, 0.5)},
    ),
    "cuda": Space(
        dims=(
            (1, 2, 3, 4, 5, 8, 16, 32, 64),
            (1, 2, 3, 4, 7, 8, 16, 24, 33, 64, 130, 256, 1031, 2048),
            (1, 2, 3, 5, 7, 13, 14, 28, 31, 56, 112),
            (1, 2, 3, 4, 5, 7, 8, 14, 17, 28, 56, 64, 112, 1031),
        ),
        max_log2_elements=22,
        scalars={"eps": (1e-5, 0.0, 1e-3, 1.0), "momentum": (0.1, 0.0, 1.0, 0.01)},
    ),
}
SANITIZE_SHAPES = [
    (2, 3, 5, 8),  # H*W = 40: every NCHW pack; C = 3 forbids channels_last packs; every block kernel instance
    (3, 40, 3, 3),  # C = 40: channels_last packs of 8 bf16 or 4 f32, 5 or 10 column units; rows of 9: packs across
    # two channels in the NCHW masked and grouped reductions
    (4, 2, 31, 33),  # 4 092 single elements per channel: several unrolled steps per thread
    (2, 64, 12, 16),  # several vectorized steps, and slices, in both layouts
    (1, 6, 12, 16),  # 192 values a channel: the warp kernels at UNITS = 8
    (100, 3, 1, 3),  # 300 values a channel in rows under a sector: the warp kernels at UNITS = 16
]
# None: the plan's own. The emulator runs a CTA's threads as OS threads, each barrier a round of all of them: there
# one dtype key runs the forced splits and the fewest-CTA elementwise grid, the others each kernel instance once (the
# GPU checks every combination).
SPLITS = {"cuda": (None, 1, 3, 16), "host": (None, 1, 2)}
HOST_EVERY_GRID = "f32"
PERSISTENT_HOST_CTAS = 64  # the emulator's cooperative launches: at most 16384 threads, all at once


def packs(shape: tuple[int, ...], dtype: str, channels_last: bool) -> list[int]:
    run = shape[1] if channels_last else shape[2] * shape[3]
    return [v for v in (0, 1, 2) if run % common.unit_elements(v, dtype) == 0]


def _per_channel(a: np.ndarray) -> np.ndarray:
    """[C, B * H * W] rows of an NCHW array (not reshape(C, -1): C may be 0)."""
    b, c, h, w = a.shape
    return np.asarray(a, np.float64).transpose(1, 0, 2, 3).reshape(c, b * h * w)


def summation_depth(plan: Plan, shape: tuple[int, ...]) -> int:
    """The longest chain of merges or additions behind a channel's statistic: each thread's sequential units
    (a pack's lanes, per unrolled step), the tree within the CTA (10 levels, or a column's rows), the slices."""
    batches, _, height, width = shape
    values = dict(plan.values)  # the one-launch kernels: one slice, one column
    slices = int(values.get("SPLIT", 1))
    threads = plan.kernel.block_dim[0]
    per_thread = math.ceil(batches * height * width / slices / max(1, threads // int(values.get("COLS", 1))))
    return per_thread + 16 + 10 + slices + 10


def _scalar(plan: Plan, name: str, value: float) -> float:
    """A scalar as the kernel receives it (f32 for f32, bf16 and f16 activations)."""
    return float(np.float32(value)) if DTYPES[plan.kernel.dtype].acc == "f32" else value


def _statistics(x: np.ndarray) -> dict[str, Any]:
    """x's per-channel count n, mean and M2 in float64 (correctly rounded sums: fsum_rows keeps them for the next
    plan of the same input), and the magnitudes that bound the kernels' rounding: s1 = sum|x - K|,
    s2 = sum (x - K)^2, K the channel's first value (the kernels' shift)."""
    rows = _per_channel(x)
    n = rows.shape[1]
    mean = fsum_rows(rows) / max(n, 1)
    m2 = fsum_rows((rows - mean[:, None]) ** 2)
    shift = rows[:, 0] if n else np.zeros(len(rows))
    return {"mean": mean, "m2": m2, "n": n, "s1": np.abs(rows - shift[:, None]).sum(axis=1),
            "s2": ((rows - shift[:, None]) ** 2).sum(axis=1)}  # fmt: skip


def _statistics_errors(plan: Plan, shape: tuple[int, ...], st: dict[str, Any], mean: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Bounds of the kernels' errors in the mean and in M2 (the module docstring's)."""
    u = DTYPES[plan.kernel.dtype].unit_roundoff
    d = summation_depth(plan, shape)
    dmean = common.gamma(u, 3 * d) * st["s1"] / max(st["n"], 1) + u * np.abs(mean)
    return dmean, common.gamma(u, 4 * d) * st["s2"]


class _Training(Family):
    dtypes = common.DTYPE_KEYS
    spaces = SPACES
    layouts = (NCHW, CHANNELS_LAST)
    sanitize_shapes = SANITIZE_SHAPES

    def layout_of(self, plan: Plan) -> Layout:
        return CHANNELS_LAST if training.reads_channels_last(plan.kernel) else NCHW

    def refusal(self, shape: tuple[int, ...]) -> str | None:
        """One value per channel has no unbiased variance: refused, as PyTorch refuses it."""
        b, _, h, w = shape
        return "training mode needs more than 1 value per channel" if b * h * w == 1 else None

    # The direction of the one-launch kernels (training.fused) that also run this family's problems; None: none.
    which: str | None = None

    def _plans(self, build: Any, backend: str, shape: tuple[int, ...], dtype: str, elementwise: bool = True,
               activation: int = 0) -> list[Plan]:  # fmt: skip
        """Both layouts, every pack their runs allow, the plan's own split and forced ones; where the plans end in
        an `elementwise` launch, with its own grid and with the fewest CTAs, and NCHW's flat packs where no pack
        divides the rows (training.FLAT), NCHW's reductions over groups of channels where they fit (training.GROUPS);
        the one-launch kernels at each CTA size, and the warp kernels where a channel fits them
        (channels_last: one column of units a CTA and the widest of column_widths; the emulator: one dtype key, the
        others the smallest; channels_last's the smallest CTA only); channels_last's persistent kernels at every
        (units, cols) whose grid is resident (the emulator: one), and its cooperative ones at 1 and 3 slices on the
        narrowest and widest column blocks (the emulator: one)."""
        storage, param = common.split_key(dtype)
        sms = 1 if backend == "host" else LISTED_SMS
        every_grid = backend == "cuda" or dtype == HOST_EVERY_GRID
        out = []
        for channels_last in (False, True):
            for vectorized in packs(shape, storage, channels_last):
                for split in SPLITS[backend] if every_grid else (None,):
                    out.append(build(shape, storage, param, vectorized, channels_last, sms, split))
                if not every_grid or not elementwise:
                    continue
                fewest = training.column_step(shape, storage, vectorized) if channels_last else 1
                out.append(build(shape, storage, param, vectorized, channels_last, sms, None, fewest))
            if elementwise and not channels_last and training.flat_fits(shape, storage):  # type: ignore[arg-type]
                splits = SPLITS[backend] if every_grid else (None,)
                out += [build(shape, storage, param, mode, False, sms, split, packs=training.FLAT)
                        for mode in (0, training.FLAT) for split in splits]  # fmt: skip
            if elementwise and not channels_last and training.groups_fit(shape, storage, 16, False):  # type: ignore[arg-type]
                rows = training.elementwise_mode(shape, storage, 16, False)  # type: ignore[arg-type]
                out += [build(shape, storage, param, training.GROUPS, False, sms, split, packs=rows)
                        for split in (SPLITS[backend] if every_grid else (None,))]  # fmt: skip
        if not self.which:
            return out
        blocks = training.FUSED_BLOCKS if every_grid else training.FUSED_BLOCKS[:1]
        if training.fusable(shape, storage):  # type: ignore[arg-type]
            out += [training.fused(self.which, shape, storage, param, vectorized, block, activation)  # type: ignore[arg-type]
                    for vectorized in packs(shape, storage, False) for block in blocks]  # fmt: skip
        for channels_last in (False, True):
            if units := training.warp_units(shape, storage, channels_last):  # type: ignore[arg-type]
                out.append(training.warp(self.which, shape, storage, param, units, activation, channels_last))  # type: ignore[arg-type]
        # The GPU's checks take every block instance holding the channel; the emulator the candidates' smallest CTA.
        options = training.block_options(shape, every=backend == "cuda")  # type: ignore[arg-type]
        out += [training.block(self.which, shape, storage, param, threads, units, activation)  # type: ignore[arg-type]
                for threads, units in (options if backend == "cuda" else options[:1])]  # fmt: skip
        for vectorized in packs(shape, storage, True):
            widths = training.column_widths(shape, storage, vectorized, sms)  # type: ignore[arg-type]
            widths = list(dict.fromkeys((1, widths[-1]))) if every_grid else widths[-1:]
            # One CTA size in the emulator (the GPU's checks take every one): each instance is one more library
            # loaded into the test process.
            out += [training.fused_columns(self.which, shape, storage, param, vectorized, block, cols, activation)  # type: ignore[arg-type]
                    for block in (blocks if backend == "cuda" else blocks[:1]) for cols in widths]  # fmt: skip
            # Grids every CTA of which is resident (on the GPU one an SM; the emulator's limit); the emulator's with
            # the fewest rows a thread and the widest column block: the most slices to merge.
            ctas = LISTED_SMS if backend == "cuda" else PERSISTENT_HOST_CTAS
            options = training.persistent_options(shape, storage, vectorized, sms, ctas)  # type: ignore[arg-type]
            if backend == "host" and options:
                options = [max(options, key=lambda option: (-option[0], option[1]))]
            out += [training.persistent(self.which, shape, storage, param, vectorized, units, cols, activation)  # type: ignore[arg-type]
                    for units, cols in options]  # fmt: skip
            # The cooperative kernels, one slice and several (some empty on small shapes), on the narrowest and
            # the widest column blocks; on the GPU in grids of at most two CTAs an SM, which every instance's
            # registers allow (the emulator: the widest, three slices).
            runs = training.unit_columns(shape, storage, vectorized)  # type: ignore[arg-type]
            widths = training.column_widths(shape, storage, vectorized, sms) if runs else []  # type: ignore[arg-type]
            spread = []
            for cols in dict.fromkeys(widths[:1] + widths[-1:]):
                fits = [split for split in (1, 2, 3) if backend == "host" or runs[0] // cols * split <= 2 * sms]
                spread += [(cols, split) for split in dict.fromkeys(fits[:1] + fits[-1:])]
            if backend == "host":
                spread = spread[-1:]
            out += [training.cooperative(self.which, shape, storage, param, vectorized, cols, split, activation)  # type: ignore[arg-type]
                    for cols, split in spread]  # fmt: skip
        return out


class TrainingForward(_Training):
    op = forward.NATIVE
    which = "forward"
    scalars = {"training": True, "momentum": 0.1, "eps": 1e-5}  # noqa: RUF012
    suites = {  # noqa: RUF012
        "cuda": [(2, 3, 5, 7), (4, 8, 17, 19), (16, 8, 1, 1), (2, 16, 32, 32), (32, 64, 28, 28), (3, 5, 1, 1031),
                 (8, 64, 14, 14), (4, 256, 7, 7)],
        # The last: channels_last threads with whole steps of rows (and elementwise units) and a tail.
        "host": [(2, 3, 5, 7), (16, 8, 1, 1), (2, 16, 4, 4), (4, 16, 12, 12)],
    }  # fmt: skip

    @property
    def outputs(self) -> tuple[str, ...]:
        return (*super().outputs, "running_mean", "running_var")

    def inputs(self, shape: tuple[int, ...], dtype: str, seed: int = 0) -> dict[str, np.ndarray]:
        names = ("x", "weight", "bias", "running_mean", "running_var")
        return common.random_inputs(shape, dtype, seed, names)  # type: ignore[arg-type]

    def run(self, plan: Plan | None, data: dict[str, Any], backend: str) -> tuple[Any, ...]:
        """The op's outputs and the running statistics it updated (on copies: the inputs are kept for others)."""
        running = {n: arrays.copy(data[n]) for n in ("running_mean", "running_var")}
        out = super().run(plan, data | running, backend)
        return (*out, running["running_mean"], running["running_var"])

    def reference(self, inputs: dict[str, np.ndarray], plan: Plan) -> tuple[np.ndarray, ...]:
        """(y, save_mean, save_invstd, running_mean, running_var) in float64. An empty batch launches nothing: the
        saved statistics are zeros, the running ones unchanged."""
        st = _statistics(inputs["x"])
        eps, momentum = (_scalar(plan, k, self.scalars[k]) for k in ("eps", "momentum"))
        x, weight, bias, rm, rv = (np.asarray(inputs[k], np.float64) for k in
                                   ("x", "weight", "bias", "running_mean", "running_var"))  # fmt: skip
        if st["n"] == 0:
            zeros = np.zeros_like(rm)
            return x, zeros, zeros, rm, rv
        invstd = 1 / np.sqrt(st["m2"] / st["n"] + eps)
        c = (slice(None), None, None)
        y = (x - st["mean"][c]) * (weight * invstd)[c] + bias[c]
        unbiased = st["m2"] / (st["n"] - 1)
        return (y, st["mean"], invstd, (1 - momentum) * rm + momentum * st["mean"],
                (1 - momentum) * rv + momentum * unbiased)  # fmt: skip

    def tolerances(self, plan: Plan, shape: tuple[int, ...], inputs: dict[str, np.ndarray],
                   ref: tuple[np.ndarray, ...]) -> list[np.ndarray]:  # fmt: skip
        dtype, param = plan.kernel.dtype, plan.kernel.param_dtype
        u = DTYPES[dtype].unit_roundoff
        us, up = DTYPES[dtype].storage_roundoff, DTYPES[param].storage_roundoff
        st = _statistics(inputs["x"])
        n = st["n"]
        eps, momentum = (_scalar(plan, k, self.scalars[k]) for k in ("eps", "momentum"))
        _, mean, invstd, rm, rv = ref
        if n == 0:  # nothing launched: exact
            return [np.full_like(r, common.floor(dtype)) for r in ref]
        var = st["m2"] / n
        dmean, dm2 = _statistics_errors(plan, shape, st, mean)
        dvar = dm2 / n + u * var
        dinvstd = invstd * (dvar / (2 * (var + eps)) + 4 * u)
        x, weight, bias, old_rm, old_rv = (np.asarray(inputs[k], np.float64) for k in
                                           ("x", "weight", "bias", "running_mean", "running_var"))  # fmt: skip
        c = (slice(None), None, None)
        t = np.abs((x - mean[c]) * (weight * invstd)[c])
        dy = (np.abs(weight) * invstd * dmean)[c] + np.abs(x - mean[c]) * (np.abs(weight) * dinvstd)[c]
        dy = dy + 8 * u * (t + np.abs(bias)[c])
        unbiased = st["m2"] / max(n - 1, 1)
        drm = momentum * dmean + 4 * u * (np.abs((1 - momentum) * old_rm) + np.abs(momentum * mean))
        drv = momentum * (dm2 / max(n - 1, 1) + 2 * u * unbiased) + 4 * u * (np.abs((1 - momentum) * old_rv)
                                                                           + momentum * unbiased)  # fmt: skip
        tiny = common.floor(dtype)
        reference = [16 * U64 * (t + np.abs(bias)[c]), 16 * U64 * np.abs(mean), 16 * U64 * invstd,
                     16 * U64 * np.abs(rm), 16 * U64 * np.abs(rv)]  # fmt: skip
        kernel = [dy, dmean, dinvstd, drm, drv]
        stored = [us, 0.0, 0.0, up, up]
        return [(1 + s) * k + s * np.abs(r) + e + tiny
                for s, k, r, e in zip(stored, kernel, ref, reference, strict=True)]  # fmt: skip

    def plans(self, backend: str, shape: tuple[int, ...], dtype: str, exhaustive: bool = False) -> list[Plan]:
        return self._plans(training.forward, backend, shape, dtype)


class TrainingBackward(_Training):
    op = backward.NATIVE
    which = "backward"
    scalars = {"training": True, "eps": 1e-5}  # noqa: RUF012
    suites = TrainingForward.suites
    spaces = {b: dataclasses.replace(s, scalars={"eps": s.scalars["eps"]}) for b, s in SPACES.items()}  # noqa: RUF012

    def inputs(self, shape: tuple[int, ...], dtype: str, seed: int = 0) -> dict[str, np.ndarray]:
        """dy, x, weight and the running statistics (not read in training mode) at random; save_mean and
        save_invstd: x's batch statistics, rounded to the accumulation type (as the forward saves them)."""
        out = common.random_inputs(shape, dtype, seed, ("dy", "x", "weight", "running_mean", "running_var"))  # type: ignore[arg-type]
        rows = _per_channel(out["x"])
        mean = rows.mean(axis=1) if rows.shape[1] else np.zeros(len(rows))
        var = rows.var(axis=1) if rows.shape[1] else np.ones(len(rows))
        acc = DTYPES[common.split_key(dtype)[0]].acc_numpy
        return out | {"save_mean": mean.astype(acc), "save_invstd": (1 / np.sqrt(var + 1e-5)).astype(acc)}

    def _sums(self, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, ...]:
        """Per channel sum(dy) and sum(dy * (x - mean)) correctly rounded (fsum_rows keeps them for the next plan of
        the same input), and the magnitudes that bound their rounding."""
        dy, x = _per_channel(inputs["dy"]), _per_channel(inputs["x"])
        mean = np.asarray(inputs["save_mean"], np.float64)
        terms = dy * (x - mean[:, None])
        return fsum_rows(dy), fsum_rows(terms), np.abs(dy).sum(axis=1), np.abs(terms).sum(axis=1)

    def reference(self, inputs: dict[str, np.ndarray], plan: Plan) -> tuple[np.ndarray, ...]:
        s1, s2, _, _ = self._sums(inputs)
        dy, x, weight, mean, invstd = (np.asarray(inputs[k], np.float64) for k in
                                       ("dy", "x", "weight", "save_mean", "save_invstd"))  # fmt: skip
        n = max(1, dy.size // max(1, dy.shape[1]))
        c = (slice(None), None, None)
        dx = (weight * invstd)[c] * (dy - (s1 / n)[c] - (x - mean[c]) * (invstd**2 * s2 / n)[c])
        return dx, s2 * invstd, s1

    def tolerances(self, plan: Plan, shape: tuple[int, ...], inputs: dict[str, np.ndarray],
                   ref: tuple[np.ndarray, ...]) -> list[np.ndarray]:  # fmt: skip
        dtype, param = plan.kernel.dtype, plan.kernel.param_dtype
        u = DTYPES[dtype].unit_roundoff
        us, up = DTYPES[dtype].storage_roundoff, DTYPES[param].storage_roundoff
        s1, s2, abs_dy, abs_terms = self._sums(inputs)
        d = summation_depth(plan, shape)
        ds1, ds2 = common.gamma(u, d) * abs_dy, common.gamma(u, d + 2) * abs_terms
        dy, x, weight, mean, invstd = (np.asarray(inputs[k], np.float64) for k in
                                       ("dy", "x", "weight", "save_mean", "save_invstd"))  # fmt: skip
        n = max(1, dy.size // max(1, dy.shape[1]))
        c = (slice(None), None, None)
        k1 = np.abs(weight * invstd)
        k2 = k1 * invstd**2 * np.abs(s2) / n
        first, second = np.abs(dy - (s1 / n)[c]) * k1[c], np.abs(x - mean[c]) * k2[c]
        ddx = (k1 * (ds1 / n + u * np.abs(s1) / n))[c] + 6 * u * (first + second)
        ddx = ddx + np.abs(x - mean[c]) * (k1 * invstd**2 * ds2 / n + 6 * u * k2)[c]
        kernel = [ddx, invstd * ds2 + u * np.abs(ref[1]), ds1]
        reference = [16 * U64 * (first + second), 16 * U64 * invstd * abs_terms, 16 * U64 * abs_dy]
        tiny = common.floor(dtype)
        return [(1 + s) * k + s * np.abs(r) + e + tiny
                for s, k, r, e in zip((us, up, up), kernel, ref, reference, strict=True)]  # fmt: skip

    def plans(self, backend: str, shape: tuple[int, ...], dtype: str, exhaustive: bool = False) -> list[Plan]:
        return self._plans(training.backward, backend, shape, dtype)


class Moments(_Training):
    """SyncBatchNorm's per-rank statistics (batch_norm_2d_moments): each channel's mean and M2, with the forward's
    error bounds; one value per channel is a part of a batch like any other."""

    op = sync.MOMENTS
    dtypes = ("f32", "f64", "bf16", "f16")  # no parameters: no mixed pairing
    spaces = {b: dataclasses.replace(s, scalars={}) for b, s in SPACES.items()}  # noqa: RUF012
    suites = {  # noqa: RUF012
        "cuda": TrainingForward.suites["cuda"],
        "host": [(2, 3, 5, 7), (1, 5, 1, 1), (2, 16, 4, 4)],
    }

    def refusal(self, shape: tuple[int, ...]) -> str | None:
        return None

    def inputs(self, shape: tuple[int, ...], dtype: str, seed: int = 0) -> dict[str, np.ndarray]:
        return common.random_inputs(shape, dtype, seed, ("x",))  # type: ignore[arg-type]

    def reference(self, inputs: dict[str, np.ndarray], plan: Plan) -> tuple[np.ndarray, ...]:
        """(mean, m2) in float64: zeros for an empty batch (nothing launched)."""
        st = _statistics(inputs["x"])
        return st["mean"], st["m2"]

    def tolerances(self, plan: Plan, shape: tuple[int, ...], inputs: dict[str, np.ndarray],
                   ref: tuple[np.ndarray, ...]) -> list[np.ndarray]:  # fmt: skip
        st = _statistics(inputs["x"])
        tiny = common.floor(plan.kernel.dtype)
        if st["n"] == 0:  # nothing launched: exact
            return [np.full_like(r, tiny) for r in ref]
        dmean, dm2 = _statistics_errors(plan, shape, st, ref[0])
        return [dmean + 16 * U64 * np.abs(ref[0]) + tiny, dm2 + 16 * U64 * st["s2"] + tiny]

    def plans(self, backend: str, shape: tuple[int, ...], dtype: str, exhaustive: bool = False) -> list[Plan]:
        def build(shape: common.Shape4, storage: str, param: str, vectorized: int, channels_last: bool, sms: int,
                  split: int | None) -> Plan:  # fmt: skip
            return training.reduction(BatchNorm2dMoments, shape, storage, param, vectorized, channels_last, sms, split)

        return self._plans(build, backend, shape, dtype, elementwise=False)


FAMILIES = (TrainingForward(), TrainingBackward(), Moments())
