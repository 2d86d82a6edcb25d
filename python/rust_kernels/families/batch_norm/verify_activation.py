"""What verifies BatchNorm2d with its activation fused (activation.py): the training families' inputs, spaces, plans
and error bounds, through the activation. The plans cover every activation; each runs and is referenced with the
activation its kernels fuse.

Forward: y = act(z), z the training forward's output, |act'| <= L (1 for ReLU and ReLU6, 1.0998 for SiLU, 1.5 for
Hardswish), so |y^ - y| <= L |z^ - z| + 4u |y| (SiLU's sigmoid and product round a few times; Hardswish's z + 3, its
product with z and that product's with 1/6 round once each, 1/6 itself is within u / 2: 3.5u). SiLU over 16-bit
activations takes the fast sigmoid (activation.rs.j2): s within 13u relative (exp_fast within 4 ulps, 8u, through 1 + e
and that sum's rounding: 9u; rcp.approx within 2 ulps, 4u; docs/math.md), so 4u + 13u there.

Backward: the kernels recompute z from x, the saved statistics and the parameters in the accumulation type:
|z^ - z| <= dz = 6u (|x - mean| |weight| invstd + |bias|). They then run the training backward on g = act'(z^) dy in
dy's stead, so its bounds hold for g, plus what the difference of g^ from the reference's g = act'(z) dy adds:
where a piecewise activation's branch is ambiguous (z within dz of a kink: ReLU's 0, ReLU6's 0 and 6, Hardswish's
-3 and 3), dg <= |dy| times the jump of act' there (1 for ReLU and ReLU6, 1/2 for Hardswish); between kinks
|act''| <= S and act' itself rounds r times, so dg <= |dy| (S dz + r u) more: SiLU S = 1/2, r = 8; Hardswish
S = 1/3 (act' = z / 3 + 1/2, |act'| <= 3/2: z * (1/3), the sum and the product with dy round, (1 + 3/2 + 3/2) u);
ReLU and ReLU6 S = r = 0. With the fast sigmoid's error ds <= 13u s, SiLU's act' = s (1 + z (1 - s)) moves by up to
|1 + z - 2 z s| ds more.
A per-element dg reaches the sums whole (sum |dg| into dbias, sum |dg| |x - mean| into the other), and dx through
its own element (|k1| dg) and the sums' terms.
"""

from __future__ import annotations

import copy
import dataclasses
from functools import partial
from typing import Any

import numpy as np

from rust_kernels.dtypes import DTYPES
from rust_kernels.families.batch_norm import activation, training
from rust_kernels.families.batch_norm.verify_training import SPACES, TrainingBackward, TrainingForward
from rust_kernels.runtime import Plan

NAMES = {code: name for name, code in training.ACTIVATIONS.items()}


@dataclasses.dataclass(frozen=True)
class Bounds:
    """An activation's constants in the bounds above: |act'| <= lipschitz; act' jumps by at most `jump` at `kinks`;
    between them |act''| <= slope and act' rounds `rounding` times (in units of u, relative to |dy|)."""

    lipschitz: float
    kinks: tuple[float, ...] = ()
    jump: float = 0.0
    slope: float = 0.0
    rounding: int = 0


BOUNDS = {"relu": Bounds(1.0, (0.0,), 1.0), "silu": Bounds(1.0998, slope=0.5, rounding=8),
          "relu6": Bounds(1.0, (0.0, 6.0), 1.0), "hardswish": Bounds(1.5, (-3.0, 3.0), 0.5, 1 / 3, 4)}  # fmt: skip
HOST_SUITE = [(2, 3, 2, 2), (2, 16, 4, 4)]  # the second: packs in both layouts (the first adds no instance)
# Fuzz and property cases: both activations, and the training families' shapes (smaller on the host).
SPACE_SCALARS = {"activation": tuple(training.ACTIVATIONS)}
FAST_SIGMOID_U = 13  # the fast sigmoid's relative error in units of u (above)


def name_of(plan: Plan) -> str:
    """The activation the plan's normalize or elementwise launch fuses."""
    return NAMES[plan.launches[-1].kernel.activation]


def fast_sigmoid(plan: Plan) -> bool:
    """Whether the plan's kernels take the fast sigmoid: SiLU over 16-bit activations (activation.rs.j2)."""
    return name_of(plan) == "silu" and DTYPES[plan.kernel.dtype].size == 2


def rounding(plan: Plan) -> float:
    """act(z)'s own relative error in units of u, the forward's 4u and the fast sigmoid's where it is taken."""
    return 4 + FAST_SIGMOID_U * fast_sigmoid(plan)


def act(name: str, z: np.ndarray) -> np.ndarray:
    if name == "silu":
        return z / (1 + np.exp(-z))
    if name == "hardswish":
        return z * np.clip(z + 3, 0.0, 6.0) / 6
    return np.maximum(z, 0.0) if name == "relu" else np.clip(z, 0.0, 6.0)


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-z))


def act_grad(name: str, z: np.ndarray) -> np.ndarray:
    if name == "silu":
        s = sigmoid(z)
        return s * (1 + z * (1 - s))
    if name == "hardswish":  # torch's hardswish_backward: z / 3 + 1/2 on [-3, 3]
        return np.where(z < -3, 0.0, np.where(z <= 3, z / 3 + 0.5, 1.0))
    return ((z > 0) if name == "relu" else (z > 0) & (z < 6)).astype(np.float64)


def through_activation(inputs: dict[str, np.ndarray], plan: Plan, u: float, mean: np.ndarray,
                       invstd: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:  # fmt: skip
    """The inputs with dy replaced by the reference's g = act'(z) dy, z = (x - mean) * weight * invstd + bias, and the
    bound dg of the kernels' g (u: their unit roundoff) through the plan's activation."""
    name = name_of(plan)
    dy, x, weight, bias = (np.asarray(inputs[k], np.float64) for k in ("dy", "x", "weight", "bias"))
    c = (slice(None), None, None)
    z = (x - mean[c]) * (weight * invstd)[c] + bias[c]
    dz = 6 * u * (np.abs(x - mean[c]) * (np.abs(weight) * invstd)[c] + np.abs(bias)[c])
    g = act_grad(name, z) * dy
    bounds = BOUNDS[name]
    dg = np.abs(dy) * (bounds.slope * dz + bounds.rounding * u)
    if bounds.kinks:  # the branch is the reference's unless z is within dz of a kink
        ambiguous = np.logical_or.reduce([np.abs(z - k) <= dz + 6 * u * abs(k) for k in bounds.kinks])
        dg += np.abs(dy) * bounds.jump * ambiguous
    if fast_sigmoid(plan):
        s = sigmoid(z)
        dg += np.abs(dy) * FAST_SIGMOID_U * u * s * np.abs(1 + z - 2 * z * s)
    return inputs | {"dy": g}, dg


class _Fused:
    """The activation-fused op's family on top of a training family: runs a plan with its own activation (the op's
    plan: the family's scalars') and plans both activations."""

    scalars: dict[str, Any]

    def run(self, plan: Plan | None, data: dict[str, Any], backend: str) -> tuple[Any, ...]:
        own = copy.copy(self)  # with the plan's activation among the scalars the op is called with
        if plan is not None:
            own.scalars = self.scalars | {"activation": name_of(plan)}
        return super(_Fused, own).run(plan, data, backend)  # type: ignore[misc, no-any-return]

    def plans(self, backend: str, shape: tuple[int, ...], dtype: str, exhaustive: bool = False) -> list[Plan]:
        build = self.build  # type: ignore[attr-defined]
        plans = self._plans  # type: ignore[attr-defined]
        return [p for code in NAMES
                for p in plans(partial(build, activation=code), backend, shape, dtype, activation=code)]  # fmt: skip


def _spaces(scalars: tuple[str, ...]) -> dict[str, Any]:
    return {b: dataclasses.replace(s, scalars={k: s.scalars[k] for k in scalars} | SPACE_SCALARS,
                                   max_log2_elements=min(s.max_log2_elements, 10 if b == "host" else 22))
            for b, s in SPACES.items()}  # fmt: skip


class FusedForward(_Fused, TrainingForward):
    op = activation.FORWARD
    scalars = {"momentum": 0.1, "eps": 1e-5, "activation": "relu"}  # noqa: RUF012
    spaces = _spaces(("eps", "momentum"))
    suites = {"cuda": TrainingForward.suites["cuda"], "host": HOST_SUITE}  # noqa: RUF012
    build = staticmethod(training.forward)

    def reference(self, inputs: dict[str, np.ndarray], plan: Plan) -> tuple[np.ndarray, ...]:
        z, *rest = super().reference(inputs, plan)
        return (act(name_of(plan), z), *rest)

    def tolerances(self, plan: Plan, shape: tuple[int, ...], inputs: dict[str, np.ndarray],
                   ref: tuple[np.ndarray, ...]) -> list[np.ndarray]:  # fmt: skip
        z = TrainingForward.reference(self, inputs, plan)[0]
        dz, *rest = super().tolerances(plan, shape, inputs, (z, *ref[1:]))
        u = DTYPES[plan.kernel.dtype].unit_roundoff
        return [BOUNDS[name_of(plan)].lipschitz * dz + rounding(plan) * u * np.abs(ref[0]), *rest]


class FusedBackward(_Fused, TrainingBackward):
    op = activation.BACKWARD
    scalars = {"eps": 1e-5, "activation": "relu"}  # noqa: RUF012
    spaces = _spaces(("eps",))
    suites = {"cuda": TrainingBackward.suites["cuda"], "host": HOST_SUITE}  # noqa: RUF012
    build = staticmethod(training.backward)

    def inputs(self, shape: tuple[int, ...], dtype: str, seed: int = 0) -> dict[str, np.ndarray]:
        """The training backward's, with a bias (the parameters' dtype) for z."""
        out = super().inputs(shape, dtype, seed)
        rng = np.random.default_rng(seed + 1)
        return out | {"bias": (rng.standard_normal(shape[1]) * 0.5).astype(out["weight"].dtype)}

    def _through(self, inputs: dict[str, np.ndarray], plan: Plan, u: float) -> tuple[dict, np.ndarray]:
        mean, invstd = (np.asarray(inputs[k], np.float64) for k in ("save_mean", "save_invstd"))
        return through_activation(inputs, plan, u, mean, invstd)

    def reference(self, inputs: dict[str, np.ndarray], plan: Plan) -> tuple[np.ndarray, ...]:
        through, _ = self._through(inputs, plan, 0.0)
        return super().reference(through, plan)

    def tolerances(self, plan: Plan, shape: tuple[int, ...], inputs: dict[str, np.ndarray],
                   ref: tuple[np.ndarray, ...]) -> list[np.ndarray]:  # fmt: skip
        dtype, param = plan.kernel.dtype, plan.kernel.param_dtype
        u = DTYPES[dtype].unit_roundoff
        through, dg = self._through(inputs, plan, u)
        ddx, ddweight, ddbias = super().tolerances(plan, shape, through, ref)
        x, weight, mean, invstd = (np.asarray(inputs[k], np.float64) for k in ("x", "weight", "save_mean",
                                                                                "save_invstd"))  # fmt: skip
        c = (slice(None), None, None)
        xmu = np.abs(x - mean[c])
        n = max(1, dg.size // max(1, dg.shape[1]))
        s1, s2 = dg.sum(axis=(0, 2, 3)), (dg * xmu).sum(axis=(0, 2, 3))
        k1 = np.abs(weight) * invstd
        extra_dx = k1[c] * dg + (k1 * s1 / n)[c] + xmu * (k1 * invstd**2 * s2 / n)[c]
        us, up = DTYPES[dtype].storage_roundoff, DTYPES[param].storage_roundoff
        return [ddx + (1 + us) * extra_dx, ddweight + (1 + up) * invstd * s2, ddbias + (1 + up) * s1]


FAMILIES = (FusedForward(), FusedBackward())
