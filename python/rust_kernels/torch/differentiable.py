"""The BatchNorm2d backward ops as torch's differentiable maths, for a backward that records a graph
(create_graph=True: a gradient penalty, MAML's inner steps): the gradients then come from torch's own ops, whose
derivatives (double backward and on) torch knows. Every backward that records no graph runs our kernels. And the
training forward's tangent (forward-mode AD) in torch's ops, from what our forward saved.

Each function takes its backward op's arguments in the op's order and returns its outputs. The training-mode
gradient goes through aten's native_batch_norm_backward, whose derivative treats the batch statistics as functions of
x; the fused activations' gradient recomputes its input z = BN(x) from x the same way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

_MASK = [True, True, True]  # dx, dweight, dbias


def _channel(t: Tensor) -> Tensor:
    return t[None, :, None, None]


def batch_norm_2d_backward(dy: Tensor, x: Tensor, weight: Tensor, running_mean: Tensor | None,
                           running_var: Tensor | None, save_mean: Tensor | None, save_invstd: Tensor | None,
                           training: bool, eps: float, deterministic: bool = True) -> tuple[Tensor, ...]:  # fmt: skip
    # The statistics enter as values: aten's derivative of this takes them as functions of x itself (training mode)
    # and has none for them, while a forward operator's outputs require grad.
    statistics = (None if t is None else t.detach() for t in (running_mean, running_var, save_mean, save_invstd))
    return tuple(torch.ops.aten.native_batch_norm_backward(dy, x, weight, *statistics, training, eps, _MASK))


# The activations' derivatives at their input z, as the kernels take them (0 at ReLU's kink, as torch's).
def _relu(z: Tensor) -> Tensor:
    return (z > 0).to(z.dtype)


def _silu(z: Tensor) -> Tensor:
    s = torch.sigmoid(z)
    return s * (1 + z * (1 - s))


def _relu6(z: Tensor) -> Tensor:
    return ((z > 0) & (z < 6)).to(z.dtype)


def _hardswish(z: Tensor) -> Tensor:
    return torch.where(z < -3, 0.0, torch.where(z <= 3, z / 3 + 0.5, 1.0)).to(z.dtype)


_ACTIVATION_GRADIENTS = {"relu": _relu, "silu": _silu, "relu6": _relu6, "hardswish": _hardswish}


def _through_activation(dy: Tensor, z: Tensor, x: Tensor, activation: str) -> Tensor:
    """dy through the activation at z (in z's type), in x's dtype."""
    return (dy.to(z.dtype) * _ACTIVATION_GRADIENTS[activation](z)).to(x.dtype)


def _through_relu(dy: Tensor, y: Tensor, x: Tensor, weight: Tensor, statistics: tuple[Tensor | None, ...],
                  training: bool, eps: float) -> tuple[Tensor, ...]:  # fmt: skip
    """(dx, dresidual, dweight, dbias) of relu(BN(x) + residual) from its output y; `statistics`:
    batch_norm_2d_backward's (running_mean, running_var, save_mean, save_invstd)."""
    dresidual = dy * (y > 0)
    dx, dweight, dbias = batch_norm_2d_backward(dresidual, x, weight, *statistics, training, eps)
    return dx, dresidual, dweight, dbias


def batch_norm_2d_act_backward(dy: Tensor, x: Tensor, weight: Tensor, bias: Tensor, save_mean: Tensor,
                               save_invstd: Tensor, eps: float, activation: str) -> tuple[Tensor, ...]:  # fmt: skip
    acc = save_mean.dtype
    var, mean = torch.var_mean(x.to(acc), dim=(0, 2, 3), correction=0)
    z = (x.to(acc) - _channel(mean)) * _channel(torch.rsqrt(var + eps) * weight.to(acc)) + _channel(bias.to(acc))
    return batch_norm_2d_backward(_through_activation(dy, z, x, activation), x, weight, None, None, save_mean,
                                  save_invstd, True, eps)  # fmt: skip


def batch_norm_2d_add_relu_backward(dy: Tensor, y: Tensor, x: Tensor, weight: Tensor, save_mean: Tensor,
                                    save_invstd: Tensor, eps: float) -> tuple[Tensor, ...]:  # fmt: skip
    return _through_relu(dy, y, x, weight, (None, None, save_mean, save_invstd), True, eps)


def batch_norm_2d_act_eval_backward(dy: Tensor, x: Tensor, weight: Tensor, bias: Tensor, running_mean: Tensor,
                                    running_var: Tensor, eps: float, activation: str
                                    ) -> tuple[Tensor, ...]:  # fmt: skip
    acc = torch.promote_types(x.dtype, torch.float32)
    scale = weight.to(acc) / torch.sqrt(running_var.to(acc) + eps)
    z = (x.to(acc) - _channel(running_mean.to(acc))) * _channel(scale) + _channel(bias.to(acc))
    return batch_norm_2d_backward(_through_activation(dy, z, x, activation), x, weight, running_mean, running_var,
                                  None, None, False, eps)  # fmt: skip


def batch_norm_2d_add_relu_eval_backward(dy: Tensor, y: Tensor, x: Tensor, weight: Tensor, running_mean: Tensor,
                                         running_var: Tensor, eps: float) -> tuple[Tensor, ...]:  # fmt: skip
    return _through_relu(dy, y, x, weight, (running_mean, running_var, None, None), False, eps)


def training_tangent(x: Tensor, weight: Tensor, bias: Tensor, save_mean: Tensor, save_invstd: Tensor,
                     dx: Tensor | None, dweight: Tensor | None, dbias: Tensor | None
                     ) -> tuple[Tensor, Tensor]:  # fmt: skip
    """(z, dz): z = BN(x) in training mode and its tangent along (dx, dweight, dbias) (None: zero), in the
    accumulation type. The batch statistics move with x: dmean = mean(dx), dinvstd = -invstd^3 * mean((x - mean) *
    dx) per channel."""
    acc = save_mean.dtype
    xmu, invstd, w = x.to(acc) - _channel(save_mean), _channel(save_invstd), _channel(weight.to(acc))
    z = xmu * invstd * w + _channel(bias.to(acc))
    dz = torch.zeros_like(z)
    if dx is not None:
        dx = dx.to(acc)
        dinvstd = -(invstd**3) * (xmu * dx).mean(dim=(0, 2, 3), keepdim=True)
        dz = dz + ((dx - dx.mean(dim=(0, 2, 3), keepdim=True)) * invstd + xmu * dinvstd) * w
    if dweight is not None:
        dz = dz + xmu * invstd * _channel(dweight.to(acc))
    if dbias is not None:
        dz = dz + _channel(dbias.to(acc))
    return z, dz


def activation_tangent(activation: str, z: Tensor, dz: Tensor) -> Tensor:
    return _ACTIVATION_GRADIENTS[activation](z) * dz


BACKWARDS: dict[str, Callable[..., Any]] = {
    f.__name__: f
    for f in (
        batch_norm_2d_backward,
        batch_norm_2d_act_backward,
        batch_norm_2d_add_relu_backward,
        batch_norm_2d_act_eval_backward,
        batch_norm_2d_add_relu_eval_backward,
    )
}
