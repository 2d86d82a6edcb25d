"""What verifies BatchNorm2d with the residual add and ReLU fused (residual.py): the training families' inputs,
spaces and error bounds, with the residual.

Forward: y = relu(z + residual), z the training forward's normalised value, computed in the accumulation type
without rounding z: |y^ - y| <= |z^ - z| + u (|z| + |residual|) (the add) + us |y| (the store), ReLU being
1-Lipschitz; |z^ - z| is the training forward's bound for z (which also counts z's storage rounding: slack here).

Backward: dresidual = (0 where y <= 0, else dy) is exact (a comparison; dy's value passes), so the reference's g is
the kernels' own, and the training backward's bounds hold for dx, dweight and dbias with g in dy's stead.
"""

from __future__ import annotations

import numpy as np

from rust_kernels.dtypes import DTYPES
from rust_kernels.families.batch_norm import common, residual, training, verify_training
from rust_kernels.families.batch_norm.verify_training import U64, TrainingBackward, TrainingForward
from rust_kernels.registry import Layout
from rust_kernels.runtime import Plan

HOST_SUITE = [(2, 3, 2, 2), (2, 16, 4, 4)]  # the second: packs in both layouts
OWN_KERNELS = (residual.BatchNorm2dNormalizeAddRelu, residual.BatchNorm2dAddReluMask)


def _activations(shape: tuple[int, ...], dtype: str, seed: int) -> np.ndarray:
    """Standard-normal values shaped like x in the storage type of dtype key `dtype`."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape).astype(DTYPES[common.split_key(dtype)[0]].numpy_dtype())


class ResidualForward(TrainingForward):
    op = residual.FORWARD
    which = None  # no one-launch form
    scalars = {"momentum": 0.1, "eps": 1e-5}  # noqa: RUF012
    suites = {"cuda": TrainingForward.suites["cuda"], "host": HOST_SUITE}  # noqa: RUF012

    def inputs(self, shape: tuple[int, ...], dtype: str, seed: int = 0) -> dict[str, np.ndarray]:
        return super().inputs(shape, dtype, seed) | {"residual": _activations(shape, dtype, seed + 2)}

    def reference(self, inputs: dict[str, np.ndarray], plan: Plan) -> tuple[np.ndarray, ...]:
        z, *rest = super().reference(inputs, plan)
        return (np.maximum(z + np.asarray(inputs["residual"], np.float64), 0.0), *rest)

    def tolerances(self, plan: Plan, shape: tuple[int, ...], inputs: dict[str, np.ndarray],
                   ref: tuple[np.ndarray, ...]) -> list[np.ndarray]:  # fmt: skip
        z = TrainingForward.reference(self, inputs, plan)[0]
        dz, *rest = super().tolerances(plan, shape, inputs, (z, *ref[1:]))
        info = DTYPES[plan.kernel.dtype]
        r = np.abs(np.asarray(inputs["residual"], np.float64))
        return [dz + info.unit_roundoff * (np.abs(z) + r) + info.storage_roundoff * np.abs(ref[0]) + 16 * U64 * r,
                *rest]  # fmt: skip

    def plans(self, backend: str, shape: tuple[int, ...], dtype: str, exhaustive: bool = False) -> list[Plan]:
        return _by_backend(backend, self._plans(residual.forward_plan, backend, shape, dtype))


class Masked:
    """What verifies a backward whose first launch is the mask (dresidual = dy where y > 0, exact) and whose others
    are a gradient family's (the class after this one): the gradient plan's layout and dtype key, y among the
    inputs, and that family's references and bounds with dresidual in dy's stead."""

    @property
    def outputs(self) -> tuple[str, ...]:
        return ("dx", "dresidual", "dweight", "dbias")

    def layout_of(self, plan: Plan) -> Layout:
        return super().layout_of(residual.gradient_of(plan))  # type: ignore[misc, no-any-return]

    def inputs_key(self, plan: Plan) -> str:
        return residual.gradient_of(plan).kernel.dtype_key

    def inputs(self, shape: tuple[int, ...], dtype: str, seed: int = 0) -> dict[str, np.ndarray]:
        """The gradient family's, and y = relu of standard-normal values (about half zeros: the mask's)."""
        out = super().inputs(shape, dtype, seed)  # type: ignore[misc]
        return out | {"y": np.maximum(_activations(shape, dtype, seed + 3), 0)}  # type: ignore[no-any-return]

    def _through(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The inputs with dy replaced by g = dy where y > 0."""
        return inputs | {"dy": np.where(inputs["y"] <= 0, 0, inputs["dy"])}

    def reference(self, inputs: dict[str, np.ndarray], plan: Plan) -> tuple[np.ndarray, ...]:
        through = self._through(inputs)
        dx, dweight, dbias = super().reference(through, residual.gradient_of(plan))  # type: ignore[misc]
        return dx, np.asarray(through["dy"], np.float64), dweight, dbias

    @staticmethod
    def _masked(backend: str, shape: tuple[int, ...], dtype: str, gradients: list[Plan]) -> list[Plan]:
        """The mask launch (16-byte packs where they fit, and single elements before the first plan) before each
        of the gradient family's plans."""
        storage = common.split_key(dtype)[0]
        sms = 1 if backend == "host" else verify_training.LISTED_SMS
        masks = [residual.mask(shape, storage, alignment, sms) for alignment in (16, 1)]  # type: ignore[arg-type]
        plans = [residual.through_mask(masks[0], p) for p in gradients]
        return list(dict.fromkeys([*plans, residual.through_mask(masks[1], gradients[0])]))

    def tolerances(self, plan: Plan, shape: tuple[int, ...], inputs: dict[str, np.ndarray],
                   ref: tuple[np.ndarray, ...]) -> list[np.ndarray]:  # fmt: skip
        gradient = residual.gradient_of(plan)
        ddx, ddweight, ddbias = super().tolerances(gradient, shape, self._through(inputs),  # type: ignore[misc]
                                                   (ref[0], *ref[2:]))  # fmt: skip
        exact = np.full_like(ref[1], common.floor(gradient.kernel.dtype))
        return [ddx, exact, ddweight, ddbias]


class ResidualBackward(Masked, TrainingBackward):
    """Plans: the mask launch before each of the training backward's that the op runs (residual.runs)."""

    op = residual.BACKWARD
    scalars = {"eps": 1e-5}  # noqa: RUF012
    suites = {"cuda": TrainingBackward.suites["cuda"], "host": HOST_SUITE}  # noqa: RUF012

    def plans(self, backend: str, shape: tuple[int, ...], dtype: str, exhaustive: bool = False) -> list[Plan]:
        gradients = [p for p in self._plans(training.backward, backend, shape, dtype) if residual.runs(p)]
        return _by_backend(backend, self._masked(backend, shape, dtype, gradients))


def _by_backend(backend: str, plans: list[Plan]) -> list[Plan]:
    """Every plan on the GPU. In the emulator each of this family's own kernel instances once in each layout and
    form of the launches around it (the training families check those launches' splits and grids there): the
    forward's normalize, the backward's mask before a two-launch and a one-launch gradient."""
    if backend != "host":
        return plans
    first: dict[tuple[object, ...], Plan] = {}
    for plan in plans:
        own = next(launch.kernel for launch in plan.launches if isinstance(launch.kernel, OWN_KERNELS))
        first.setdefault((own, len(plan.launches), training.reads_channels_last(plan.launches[-1].kernel)), plan)
    return list(first.values())


FAMILIES = (ResidualForward(), ResidualBackward())
