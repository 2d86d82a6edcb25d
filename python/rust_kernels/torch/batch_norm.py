"""Fake kernels and autograd of torch.ops.rust_kernels.batch_norm_2d_forward and batch_norm_2d_backward (eval
mode), and `batch_norm_2d`, the functional form BatchNorm2d uses.

Fakes give the outputs' shapes and dtypes (for torch.compile, export and the meta device) and raise the ops' own
errors for a bad call (training=True, shapes, dtype pairs) while tracing, without specialising symbolic shapes.
The forward's autograd runs the backward op: dx, dweight and dbias where x, weight and bias need them (all three come
from one kernel); the running statistics are constants, they get no gradient. Double backward is not implemented.
"""

from __future__ import annotations

from typing import Any

import torch

from rust_kernels.errors import ArgumentError
from rust_kernels.families.batch_norm import backward, common, forward
from rust_kernels.torch import library  # (also defines the ops registered here)

Tensor = torch.Tensor
_ops = torch.ops.rust_kernels


def _check(x: Tensor, same: dict[str, Tensor], per_channel: dict[str, Tensor]) -> None:
    """The op's checks of shapes and dtypes, on fake tensors: no shape becomes a Python int."""
    if x.dim() != 4:
        raise ArgumentError(f"x: expected an NCHW array (4 dimensions), got shape {tuple(x.shape)}")
    common.check_inputs("x", x.shape, same, per_channel, "cuda" if x.is_cuda else "host")


@torch.library.register_fake("rust_kernels::batch_norm_2d_forward")
def _forward_fake(
    x: Tensor,
    weight: Tensor,
    bias: Tensor,
    running_mean: Tensor,
    running_var: Tensor,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> tuple[Tensor, Tensor, Tensor]:
    common.check_eval_mode("batch_norm_2d_forward", training, momentum)
    per_channel = {"weight": weight, "bias": bias, "running_mean": running_mean, "running_var": running_var}
    _check(x, {"x": x}, per_channel)
    return x.new_empty(x.shape), running_mean.new_empty(0), running_mean.new_empty(0)


@torch.library.register_fake("rust_kernels::batch_norm_2d_backward")
def _backward_fake(
    dy: Tensor,
    x: Tensor,
    weight: Tensor,
    running_mean: Tensor,
    running_var: Tensor,
    save_mean: Tensor | None = None,
    save_invstd: Tensor | None = None,
    training: bool = False,
    eps: float = 1e-5,
) -> tuple[Tensor, Tensor, Tensor]:
    common.check_eval_mode("batch_norm_2d_backward", training)
    _check(x, {"x": x, "dy": dy}, {"weight": weight, "running_mean": running_mean, "running_var": running_var})
    channels = x.shape[1]
    return x.new_empty(x.shape), weight.new_empty(channels), weight.new_empty(channels)


def _forward_setup(ctx: Any, inputs: tuple[Any, ...], output: tuple[Tensor, Tensor, Tensor]) -> None:
    x, weight, _, running_mean, running_var, training, _, eps = inputs
    ctx.save_for_backward(x, weight, running_mean, running_var, *output[1:])
    ctx.training, ctx.eps = training, eps


def _forward_backward(ctx: Any, dy: Tensor | None, *_: Any) -> tuple[Tensor | None, ...]:
    need = ctx.needs_input_grad[:3]  # x, weight, bias; running statistics, training, momentum and eps get none
    grads: tuple[Tensor | None, ...] = (None, None, None)
    if dy is not None and any(need):
        out = _ops.batch_norm_2d_backward(dy, *ctx.saved_tensors, ctx.training, ctx.eps)
        grads = tuple(g if n else None for g, n in zip(out, need, strict=True))
    return (*grads, None, None, None, None, None)


def _no_double_backward(ctx: Any, *_: Any) -> tuple[None, ...]:
    raise NotImplementedError("rust_kernels::batch_norm_2d_backward: double backward is not implemented")


torch.library.register_autograd("rust_kernels::batch_norm_2d_forward", _forward_backward, setup_context=_forward_setup)
torch.library.register_autograd("rust_kernels::batch_norm_2d_backward", _no_double_backward)


PLAIN = (Tensor, torch.nn.Parameter)


def _eager(tensors: tuple[Tensor, ...]) -> bool:
    """Whether batch_norm_2d may call the ops' kernels directly: plain CPU or CUDA tensors, run eagerly. torch.compile,
    tracing, functorch transforms and tensor subclasses (fake, functional, distributed) need the operators."""
    x = tensors[0]
    return (
        all(type(t) in PLAIN for t in tensors)
        and (x.is_cuda or x.is_cpu)
        and not torch.compiler.is_compiling()
        and not torch._C._are_functorch_transforms_active()
        and not torch.jit.is_tracing()
    )


def _forward(x: Tensor, weight: Tensor, bias: Tensor, running_mean: Tensor, running_var: Tensor, eps: float) -> Tensor:
    """The forward op on plain eager tensors: its fast path, else the op as the operator runs it (arguments made
    contiguous; CPU tensors in the emulator)."""
    y = forward.fast_call(x, weight, bias, running_mean, running_var, eps)
    if y is None:
        y = library.call(forward.batch_norm_2d_nchw_forward_inference, x, weight, bias, running_mean, running_var, eps)
    return y


class _EagerBatchNorm2d(torch.autograd.Function):
    """batch_norm_2d's eager path: the forward and backward ops' kernels under a plain autograd.Function. The same
    kernels as the operators, without the dispatcher and torch.library's Python autograd, which cost a model step
    about 0.2 ms of host time per BatchNorm2d (measured on the H200, docs/results)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, bias: Tensor, running_mean: Tensor, running_var: Tensor,
                eps: float) -> Tensor:  # fmt: skip
        y = _forward(x, weight, bias, running_mean, running_var, eps)
        ctx.save_for_backward(x, weight, running_mean, running_var)
        ctx.eps = eps
        return y

    @staticmethod
    def backward(ctx: Any, dy: Tensor) -> tuple[Tensor | None, ...]:
        need = ctx.needs_input_grad[:3]  # x, weight, bias; running statistics and eps get none
        if torch.is_grad_enabled():  # create_graph: the operator, so that double backward is refused as it refuses
            out = _ops.batch_norm_2d_backward(dy, *ctx.saved_tensors, None, None, False, ctx.eps)
        else:
            saved = ctx.saved_tensors
            out = backward.fast_call(dy, *saved, ctx.eps) or library.call(
                backward.batch_norm_2d_nchw_backward, dy, *saved, ctx.eps
            )
        return (*(g if n else None for g, n in zip(out, need, strict=True)), None, None, None)


def batch_norm_2d(
    x: Tensor,
    running_mean: Tensor,
    running_var: Tensor,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """torch.nn.functional.batch_norm(x, running_mean, running_var, weight, bias, training=False, eps=eps) for NCHW
    x, on our kernels (forward, and backward through autograd). A missing weight or bias is one or zero. Eager calls
    on plain tensors run the kernels directly (host cost); others go through torch.ops.rust_kernels."""
    if weight is None:
        weight = torch.ones_like(running_var)
    if bias is None:
        bias = torch.zeros_like(running_mean)
    tensors = (x, weight, bias, running_mean, running_var)
    if _eager(tensors):
        if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad or bias.requires_grad):
            return _EagerBatchNorm2d.apply(*tensors, eps)
        return _forward(*tensors, eps)
    return _ops.batch_norm_2d_forward(*tensors, False, 0.0, eps)[0]
