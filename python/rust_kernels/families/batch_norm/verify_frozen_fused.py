"""What verifies BatchNorm2d in eval mode with what follows it fused (frozen_fused.py): the eval families' inputs,
references and error bounds (verify.py), through the activation or the residual add and ReLU, in both memory
formats (the channels_last eval families' shapes and layouts, verify_frozen.py).

Forward + act: y = act(z), z the eval forward's value, |act'| <= L (verify_activation.BOUNDS): |y^ - y| <=
L |z^ - z| + 4u |y| (+ 13u |y| with the fast sigmoid: verify_activation.rounding). Forward + add + ReLU:
|y^ - y| <= |z^ - z| + u (|z| + |residual|) + us |y|, as the training form's (verify_residual.py).

Backward + act: the kernels recompute z = (x - mean) * (weight / sqrt(var + eps)) + bias in the accumulation type: 6
roundings, |z^ - z| <= dz = 6u (|x - mean| |weight| rstd + |bias|). The eval backward's bounds then hold for g =
act'(z^) dy in dy's stead, plus what g^'s distance dg from the reference's g = act'(z) dy adds
(verify_activation.through_activation: |dy| times act''s jump where a kink's branch is ambiguous, |dy| (S dz + r u)
between kinks, and the fast sigmoid's term): to dx its own |k1| dg (k1 = weight rstd; no batch terms in eval mode), to
the sums sum dg |x - mean| rstd and sum dg.
Backward + add + ReLU: the mask is exact, so the eval backward's bounds hold with g in dy's stead.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rust_kernels.dtypes import DTYPES
from rust_kernels.families.batch_norm import (
    backward,
    common,
    frozen,
    frozen_fused,
    training,
    verify,
    verify_activation,
    verify_frozen,
    verify_residual,
    verify_training,
)
from rust_kernels.registry import Layout
from rust_kernels.runtime import Plan

PER_CHANNEL = (slice(None), None, None)
ACTIVATIONS = tuple(verify_activation.NAMES)  # the ACTIVATION consts
# The emulator checks one CTA size of the NCHW split kernel and the rule's split (every one for HOST_EVERY_GRID).
NCHW_BLOCKS = {"cuda": (128, 512), "host": (128,)}
NCHW_SPLITS = {"cuda": (1, 3, 16), "host": (1, 3)}


class _EvalFused(verify_frozen._Frozen):
    """The eval families' layouts and summation depths and the training families' GPU shapes (in the emulator the
    activation families' two), under the op's own name."""

    suites = {"cuda": verify_training.TrainingForward.suites["cuda"], "host": verify_activation.HOST_SUITE}  # noqa: RUF012

    @property
    def name(self) -> str:
        return self.op.name

    def layout_of(self, plan: Plan) -> Layout:
        return self.layouts[1] if training.reads_channels_last(plan.launches[-1].kernel) else self.layouts[0]

    def depth(self, plan: Plan, shape: tuple[int, ...]) -> int:
        """The chain behind the sums of the gradient's launch (the last, after any mask launch): an NCHW kernel's as
        the eval backward's (verify.summation_depth), a channels_last one's as the training reductions'."""
        last = plan.launches[-1]
        if training.reads_channels_last(last.kernel):
            return verify_training.summation_depth(last, shape)
        return verify.summation_depth(last, shape)

    def _forward_plans(self, kind: type, backend: str, shape: tuple[int, ...], dtype: str, codes: tuple[int, ...]
                       ) -> list[Plan]:  # fmt: skip
        """Both layouts, every pack their runs allow (NCHW's flat packs where they fit), with the rule's grid and,
        where every grid is checked, one CTA striding over everything; per activation code (0: none); channels_last
        with the coefficients loaded one at a time and, where the pack holds more than one lane, in packs."""
        storage, param = common.split_key(dtype)
        sms = 1 if backend == "host" else verify.LISTED_SMS
        out = []
        for code in codes:
            for channels_last in (False, True):
                modes = verify_training.packs(shape, storage, channels_last)
                if not channels_last and training.flat_fits(shape, storage):  # type: ignore[arg-type]
                    modes.append(training.FLAT)
                for mode in modes:
                    grids = [None]
                    if self._every(backend, dtype):
                        grids.append(training.column_step(shape, storage, mode) if channels_last else 1)  # type: ignore[arg-type]
                    out += [frozen.elementwise(kind, shape, storage, param, mode, channels_last, sms, ctas, code, packs)  # type: ignore[arg-type]
                            for ctas in grids for packs in (0, 16)]  # fmt: skip
        return list(dict.fromkeys(out))

    def _gradient_plans(self, backend: str, shape: tuple[int, ...], dtype: str, code: int, exhaustive: bool = False
                        ) -> list[Plan]:  # fmt: skip
        """The eval backward's (deterministic) plans in both layouts, through activation `code` (0: none): NCHW's
        split kernel (without an activation the warp kernel too; `exhaustive`: at every CTA size) and, where it fits,
        the grouped one; channels_last's column reduction; at the rule's split and forced ones."""
        storage, param = common.split_key(dtype)
        sms = 1 if backend == "host" else verify.LISTED_SMS
        every = self._every(backend, dtype)
        channels = shape[1]
        out = []
        for vectorized in verify_training.packs(shape, storage, False):
            for block in backward.SPLIT_BLOCKS if exhaustive else NCHW_BLOCKS[backend]:
                out += [backward.split(channels, block, vectorized, 1, storage, param, s, code)
                        for s in (NCHW_SPLITS[backend] if every else (1,))]  # fmt: skip
                if not code and every:
                    out.append(backward.warp(channels, block, vectorized, storage, param))
        splits = verify_frozen.SPLITS[backend] if every else (None,)
        out += [frozen.backward(shape, storage, param, vectorized, sms, split, code)  # type: ignore[arg-type]
                for vectorized in verify_training.packs(shape, storage, True) for split in splits]  # fmt: skip
        if backward.grouped_fits(shape, storage, 16):  # type: ignore[arg-type]
            out += [backward.grouped(shape, storage, param, sms, split, activation=code) for split in splits]  # type: ignore[arg-type]
        return list(dict.fromkeys(out))


class _Activation:
    """Runs a plan with the activation its kernel fuses (the op's own plan: the family's scalars')."""

    scalars: dict[str, Any]

    def run(self, plan: Plan | None, data: dict[str, Any], backend: str) -> tuple[Any, ...]:
        scalars = self.scalars if plan is None else self.scalars | {"activation": verify_activation.name_of(plan)}
        out = self.op(*(data.get(i.name) for i in self.op.inputs), **scalars, backend=backend, plan=plan)  # type: ignore[attr-defined]
        return out if isinstance(out, tuple) else (out,)


class ActForward(_Activation, _EvalFused, verify.ForwardInference):
    op = frozen_fused.ACT_FORWARD
    scalars = {"eps": 1e-5, "activation": "relu"}  # noqa: RUF012
    spaces = verify_activation._spaces(("eps",))

    def reference(self, inputs: dict[str, np.ndarray], plan: Plan) -> tuple[np.ndarray, ...]:
        return (verify_activation.act(verify_activation.name_of(plan), super().reference(inputs, plan)[0]),)

    def tolerances(self, plan: Plan, shape: tuple[int, ...], inputs: dict[str, np.ndarray],
                   ref: tuple[np.ndarray, ...]) -> list[np.ndarray]:  # fmt: skip
        z = verify.ForwardInference.reference(self, inputs, plan)
        (dz,) = super().tolerances(plan, shape, inputs, z)
        u = DTYPES[plan.kernel.dtype].unit_roundoff
        name = verify_activation.name_of(plan)
        return [verify_activation.BOUNDS[name].lipschitz * dz + verify_activation.rounding(plan) * u * np.abs(ref[0])]

    def plans(self, backend: str, shape: tuple[int, ...], dtype: str, exhaustive: bool = False) -> list[Plan]:
        return self._forward_plans(frozen_fused.BatchNorm2dFrozenForwardAct, backend, shape, dtype, ACTIVATIONS)


class ActBackward(_Activation, _EvalFused, verify.Backward):
    op = frozen_fused.ACT_BACKWARD
    scalars = {"eps": 1e-5, "activation": "relu"}  # noqa: RUF012
    spaces = verify_activation._spaces(("eps",))

    def inputs(self, shape: tuple[int, ...], dtype: str, seed: int = 0) -> dict[str, np.ndarray]:
        names = ("dy", "x", "weight", "bias", "running_mean", "running_var")
        return common.random_inputs(shape, dtype, seed, names)  # type: ignore[arg-type]

    def _through(self, inputs: dict[str, np.ndarray], plan: Plan, u: float) -> tuple[dict, np.ndarray]:
        """The inputs with dy replaced by the reference's g = act'(z) dy (z with the running statistics), and the
        bound dg of the kernels' g."""
        mean = np.asarray(inputs["running_mean"], np.float64)
        rstd = common.rstd(inputs["running_var"], common.kernel_eps(plan.kernel, self.scalars["eps"]))
        return verify_activation.through_activation(inputs, plan, u, mean, rstd)

    def reference(self, inputs: dict[str, np.ndarray], plan: Plan) -> tuple[np.ndarray, ...]:
        return super().reference(self._through(inputs, plan, 0.0)[0], plan)

    def tolerances(self, plan: Plan, shape: tuple[int, ...], inputs: dict[str, np.ndarray],
                   ref: tuple[np.ndarray, ...]) -> list[np.ndarray]:  # fmt: skip
        dtype, param = plan.kernel.dtype, plan.kernel.param_dtype
        through, dg = self._through(inputs, plan, DTYPES[dtype].unit_roundoff)
        ddx, ddweight, ddbias = super().tolerances(plan, shape, through, ref)
        x, weight, mean = (np.asarray(inputs[k], np.float64) for k in ("x", "weight", "running_mean"))
        rstd = common.rstd(inputs["running_var"], common.kernel_eps(plan.kernel, self.scalars["eps"]))
        s1 = dg.sum(axis=(0, 2, 3))
        s2 = (dg * np.abs(x - mean[PER_CHANNEL])).sum(axis=(0, 2, 3))
        us, up = DTYPES[dtype].storage_roundoff, DTYPES[param].storage_roundoff
        extra_dx = (np.abs(weight) * rstd)[PER_CHANNEL] * dg
        return [ddx + (1 + us) * extra_dx, ddweight + (1 + up) * rstd * s2, ddbias + (1 + up) * s1]

    def plans(self, backend: str, shape: tuple[int, ...], dtype: str, exhaustive: bool = False) -> list[Plan]:
        return [p for code in ACTIVATIONS for p in self._gradient_plans(backend, shape, dtype, code, exhaustive)]


class AddReluForward(_EvalFused, verify.ForwardInference):
    op = frozen_fused.ADD_RELU_FORWARD

    def inputs(self, shape: tuple[int, ...], dtype: str, seed: int = 0) -> dict[str, np.ndarray]:
        return super().inputs(shape, dtype, seed) | {"residual": verify_residual._activations(shape, dtype, seed + 2)}

    def reference(self, inputs: dict[str, np.ndarray], plan: Plan) -> tuple[np.ndarray, ...]:
        z = super().reference(inputs, plan)[0]
        return (np.maximum(z + np.asarray(inputs["residual"], np.float64), 0.0),)

    def tolerances(self, plan: Plan, shape: tuple[int, ...], inputs: dict[str, np.ndarray],
                   ref: tuple[np.ndarray, ...]) -> list[np.ndarray]:  # fmt: skip
        z = verify.ForwardInference.reference(self, inputs, plan)
        (dz,) = super().tolerances(plan, shape, inputs, z)
        info = DTYPES[plan.kernel.dtype]
        r = np.abs(np.asarray(inputs["residual"], np.float64))
        y = np.abs(ref[0])
        return [dz + info.unit_roundoff * (np.abs(z[0]) + r) + info.storage_roundoff * y + 16 * verify.U64 * r]

    def plans(self, backend: str, shape: tuple[int, ...], dtype: str, exhaustive: bool = False) -> list[Plan]:
        return self._forward_plans(frozen_fused.BatchNorm2dFrozenForwardAddRelu, backend, shape, dtype, (0,))


class AddReluBackward(verify_residual.Masked, _EvalFused, verify.Backward):
    """Plans: the mask launch before each of the eval backward's."""

    op = frozen_fused.ADD_RELU_BACKWARD

    def plans(self, backend: str, shape: tuple[int, ...], dtype: str, exhaustive: bool = False) -> list[Plan]:
        return self._masked(backend, shape, dtype, self._gradient_plans(backend, shape, dtype, 0, exhaustive))


FAMILIES = (ActForward(), ActBackward(), AddReluForward(), AddReluBackward())
