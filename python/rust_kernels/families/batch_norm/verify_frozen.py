"""What verifies eval mode (frozen running statistics) of the torch-native BatchNorm2d ops over channels_last arrays,
the kernels of frozen.py: the same maths, references and error bounds as the NCHW eval ops' (verify.py), with the
summation depth of the channels_last column reductions (verify_training.summation_depth), the training families'
shapes and channels_last layout."""

from __future__ import annotations

from typing import Any

from rust_kernels.families.batch_norm import backward, common, forward, frozen, training, verify, verify_training
from rust_kernels.registry import Layout
from rust_kernels.runtime import Plan

LAYOUTS = (Layout("contiguous", (0, 1, 2, 3), True), verify_training.CHANNELS_LAST)
# Forced grids and splits: the GPU checks each; the emulator one dtype key (the others the plan's own).
SPLITS = {"cuda": (None, 1, 3, 16), "host": (None, 2)}
HOST_EVERY_GRID = verify_training.HOST_EVERY_GRID


class _Frozen:
    """What both channels_last eval families share: the torch-native op in eval mode, the training families' shapes
    and sanitizer shapes, both memory formats accepted (the op picks the NCHW eval kernels for NCHW arrays)."""

    suites = verify_training.TrainingForward.suites
    sanitize_shapes = verify_training.SANITIZE_SHAPES
    layouts = LAYOUTS
    op: Any

    @property
    def name(self) -> str:
        return f"{self.op.name}_eval"

    def layout_of(self, plan: Plan) -> Layout:
        return self.layouts[1] if training.reads_channels_last(plan.kernel) else self.layouts[0]

    def depth(self, plan: Plan, shape: tuple[int, ...]) -> int:
        return verify_training.summation_depth(plan, shape)

    @staticmethod
    def _every(backend: str, dtype: str) -> bool:
        return backend == "cuda" or dtype == HOST_EVERY_GRID


class FrozenForward(_Frozen, verify.ForwardInference):
    """batch_norm_2d_forward(training=False) over channels_last x: y, checked as the NCHW eval forward's."""

    op = forward.NATIVE
    scalars = {"training": False, "momentum": 0.1, "eps": 1e-5}  # noqa: RUF012

    @property
    def outputs(self) -> tuple[str, ...]:
        return ("y",)

    def run(self, plan: Plan | None, arrays: dict[str, Any], backend: str) -> tuple[Any, ...]:
        """y (save_mean and save_invstd are empty in eval mode)."""
        return super().run(plan, arrays, backend)[:1]

    def plans(self, backend: str, shape: tuple[int, ...], dtype: str, exhaustive: bool = False) -> list[Plan]:
        """Every pack C allows, with the rule's grid and, where every grid is checked, the fewest CTAs that keep each
        thread on one column of channel units; each with the coefficients loaded one at a time and, where the pack
        holds more than one lane, in packs (the arrays check allocates are 16-byte aligned)."""
        storage, param = common.split_key(dtype)
        sms = 1 if backend == "host" else verify.LISTED_SMS
        out = []
        for vectorized in verify_training.packs(shape, storage, True):
            grids = [None]
            if self._every(backend, dtype):
                grids.append(training.column_step(shape, storage, vectorized))
            out += [frozen.forward(shape, storage, param, vectorized, sms, ctas, packs)  # type: ignore[arg-type]
                    for ctas in grids for packs in (0, 16)]  # fmt: skip
        return list(dict.fromkeys(out))


class FrozenBackward(_Frozen, verify.Backward):
    """batch_norm_2d_backward(training=False) over channels_last dy and x: dx, dweight and dbias, checked as the
    NCHW eval backward's."""

    op = backward.NATIVE
    scalars = {"training": False, "eps": 1e-5}  # noqa: RUF012

    def plans(self, backend: str, shape: tuple[int, ...], dtype: str, exhaustive: bool = False) -> list[Plan]:
        """Every pack C allows, with the rule's split and forced ones (the slices merged by the last CTA)."""
        storage, param = common.split_key(dtype)
        sms = 1 if backend == "host" else verify.LISTED_SMS
        splits = SPLITS[backend] if self._every(backend, dtype) else (None,)
        out = [frozen.backward(shape, storage, param, vectorized, sms, split)  # type: ignore[arg-type]
               for vectorized in verify_training.packs(shape, storage, True) for split in splits]  # fmt: skip
        return list(dict.fromkeys(out))


FAMILIES = (FrozenForward(), FrozenBackward())
