"""`BatchNorm2d`, torch.nn.BatchNorm2d on rust_kernels' kernels, `batch_norm_2d` (its functional form, eval and
training mode), `SyncBatchNorm` (torch.nn.SyncBatchNorm on them, its collectives torch.distributed's) and
`convert(model)`.

Eagerly, on plain CPU/CUDA tensors, batch_norm_2d skips the dispatcher: the ops' kernels under a plain
autograd.Function (torch.library's Python autograd and dispatch cost a model step about 0.2 ms of host time per
BatchNorm2d, measured on the H200). Under torch.compile, tracing, functorch transforms, forward-mode AD or with tensor
subclasses it calls the operators (torch.ops.rust_kernels), whose fakes and autograd come from the declarations.
"""

from __future__ import annotations

import operator
import warnings
from collections import Counter
from typing import Any

import torch
import torch.distributed as dist
from torch.autograd import forward_ad
from torch.autograd.function import once_differentiable

from rust_kernels.errors import RustKernelsError
from rust_kernels.families.batch_norm import activation, backward, forward, frozen_fused, sync
from rust_kernels.families.batch_norm import residual as add_relu
from rust_kernels.runtime import Op
from rust_kernels.torch import differentiable
from rust_kernels.torch.library import call

Tensor = torch.Tensor
_ops = torch.ops.rust_kernels
PLAIN = (Tensor, torch.nn.Parameter)


def _eager(tensors: tuple[Tensor, ...]) -> bool:
    """Whether batch_norm_2d may call the ops' kernels directly: plain CPU or CUDA tensors, run eagerly."""
    x = tensors[0]
    return (
        all(type(t) in PLAIN for t in tensors)
        and (x.is_cuda or x.is_cpu)
        and not torch.compiler.is_compiling()
        and not torch._C._are_functorch_transforms_active()
        and not torch.jit.is_tracing()
    )


def _needs_grad(*tensors: Tensor) -> bool:
    """Whether autograd records a graph through these tensors (the eager paths then run an autograd.Function)."""
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def _forward(x: Tensor, weight: Tensor, bias: Tensor, running_mean: Tensor, running_var: Tensor, eps: float) -> Tensor:
    """The eval forward on plain eager tensors: the NCHW op, or the torch-native op (training=False) for a
    channels_last x, whose kernels read it as it is."""
    if _channels_last(x):  # the op's scalars: training, momentum, eps
        return call(forward.NATIVE, x, weight, bias, running_mean, running_var, False, 0.0, eps)[0]  # type: ignore[no-any-return]
    return call(forward.NCHW, x, weight, bias, running_mean, running_var, eps, None)  # the op's scalars: eps, block_hw


def _backward(dy: Tensor, x: Tensor, weight: Tensor, running_mean: Tensor, running_var: Tensor, eps: float
              ) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    """The eval backward on plain eager tensors: the NCHW op, or the torch-native op (training=False, dy in x's
    memory format) for a channels_last x."""
    if _channels_last(x):  # the op's scalars: training, eps, deterministic
        return call(backward.NATIVE, _in_format(dy, x), x, weight, running_mean, running_var, None, None, False, eps,  # type: ignore[no-any-return]
                    True)  # fmt: skip
    return call(backward.NCHW, dy, x, weight, running_mean, running_var, eps, None, True)  # type: ignore[no-any-return]


class _EagerBatchNorm2d(torch.autograd.Function):
    """batch_norm_2d's eager path: the forward and backward ops' kernels under a plain autograd.Function, with the
    forward-mode derivative (jvp) too."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, bias: Tensor, running_mean: Tensor, running_var: Tensor,
                eps: float) -> Tensor:  # fmt: skip
        y = _forward(x, weight, bias, running_mean, running_var, eps)
        ctx.save_for_backward(x, weight, running_mean, running_var)
        ctx.save_for_forward(x, weight, running_mean, running_var)
        ctx.eps = eps
        return y

    @staticmethod
    def jvp(ctx: Any, dx: Tensor | None, dweight: Tensor | None, dbias: Tensor | None, dmean: Tensor | None,
            dvar: Tensor | None, _: Any) -> Tensor:  # fmt: skip
        """y = (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(var + eps): its directional derivative. The x term
        (dx * rstd * weight) runs our forward kernel; the others, per channel, torch's ops."""
        x, weight, mean, var = ctx.saved_tensors
        zero = torch.zeros_like(mean)
        out = torch.zeros_like(x) if dx is None else _forward(dx, weight, zero, zero, var, ctx.eps)
        out = out.to(torch.promote_types(x.dtype, weight.dtype))
        rstd = torch.rsqrt(var + ctx.eps)

        def channel(t: Tensor) -> Tensor:
            return t[None, :, None, None]

        if dweight is not None:
            out += (x - channel(mean)) * channel(rstd * dweight)
        if dbias is not None:
            out += channel(dbias)
        if dmean is not None:
            out -= channel(dmean * rstd * weight)
        if dvar is not None:
            out -= (x - channel(mean)) * channel(0.5 * weight * rstd**3 * dvar)
        return out.to(x.dtype)

    @staticmethod
    def backward(ctx: Any, dy: Tensor) -> tuple[Tensor | None, ...]:
        need = ctx.needs_input_grad[:3]  # x, weight, bias; running statistics and eps get none
        if torch.is_grad_enabled():  # create_graph: torch's differentiable maths, so that double backward works
            out = differentiable.batch_norm_2d_backward(dy, *ctx.saved_tensors, None, None, False, ctx.eps)
        else:
            out = _backward(dy, *ctx.saved_tensors, ctx.eps)
        return (*(g if n else None for g, n in zip(out, need, strict=True)), None, None, None)


def _keep_for_tangent(ctx: Any, *primals: Tensor) -> None:
    """What a training Function's jvp reads (x, weight, bias, save_mean, save_invstd), kept only where forward-mode
    AD is on: its tangent is computed from them in torch's ops (differentiable.training_tangent)."""
    ctx.primals = primals if forward_ad._current_level >= 0 else None


class _EagerTrainingBatchNorm2d(torch.autograd.Function):
    """Training mode's eager path: the torch-native forward and backward ops' kernels (batch statistics; the running
    statistics updated in place) under a plain autograd.Function."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, bias: Tensor, running_mean: Tensor, running_var: Tensor,
                momentum: float, eps: float) -> Tensor:  # fmt: skip
        y, save_mean, save_invstd = _training_forward(x, weight, bias, running_mean, running_var, momentum, eps)
        ctx.save_for_backward(x, weight, save_mean, save_invstd)
        ctx.statistics = (running_mean, running_var)  # not read by the backward: shapes only, and never saved
        ctx.eps = eps
        _keep_for_tangent(ctx, x, weight, bias, save_mean, save_invstd)
        return y

    @staticmethod
    def jvp(ctx: Any, dx: Tensor | None, dweight: Tensor | None, dbias: Tensor | None, *_: Any) -> Tensor:
        x = ctx.primals[0]
        return differentiable.training_tangent(*ctx.primals, dx, dweight, dbias)[1].to(x.dtype)

    @staticmethod
    def backward(ctx: Any, dy: Tensor) -> tuple[Tensor | None, ...]:
        x, weight, save_mean, save_invstd = ctx.saved_tensors
        tensors = (_in_format(dy, x), x, weight, *ctx.statistics, save_mean, save_invstd)
        # the op's scalars: training, eps, deterministic
        return (*_gradients(ctx, backward.NATIVE, tensors, (True, ctx.eps, True)), None, None, None, None)


def _gradients(ctx: Any, op: Op, tensors: tuple[Tensor, ...], scalars: tuple[Any, ...]) -> tuple[Tensor | None, ...]:
    """A training-mode Function's backward: backward op `op`'s outputs, each the gradient of the forward's argument
    at its position (None where that one needs none). While a graph of the backward is recorded (create_graph),
    torch's differentiable maths (double backward then works); else the op's kernels directly."""
    if torch.is_grad_enabled():
        out = differentiable.BACKWARDS[op.name](*tensors, *scalars)
    else:
        out = call(op, *tensors, *scalars)
    need = ctx.needs_input_grad[: len(out)]
    return tuple(g if n else None for g, n in zip(out, need, strict=True))


def _training_forward(x: Tensor, weight: Tensor, bias: Tensor, running_mean: Tensor, running_var: Tensor,
                      momentum: float, eps: float) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    return call(forward.NATIVE, x, weight, bias, running_mean, running_var, True, momentum, eps)  # type: ignore[no-any-return]


def _in_format(t: Tensor, like: Tensor) -> Tensor:
    """`t` in `like`'s memory format (a gradient may come contiguous for a channels_last activation)."""
    return t.contiguous(memory_format=torch.channels_last) if _channels_last(like) else t.contiguous()


def batch_norm_2d(
    x: Tensor,
    running_mean: Tensor,
    running_var: Tensor,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """torch.nn.functional.batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps) for x of
    shape [B, C, H, W], on our kernels (forward, and backward through autograd), x NCHW or channels_last (y in x's
    memory format). Eval mode: frozen running statistics. Training mode: batch statistics, running_mean and
    running_var updated in place. A missing weight or bias is one or zero. Eager calls on plain tensors run
    the kernels directly (host cost); others go through torch.ops.rust_kernels."""
    if weight is None:
        weight = torch.ones_like(running_var)
    if bias is None:
        bias = torch.zeros_like(running_mean)
    tensors = (x, weight, bias, running_mean, running_var)
    if _eager(tensors):
        needs_grad = _needs_grad(x, weight, bias)
        if training:
            if needs_grad or forward_ad._current_level >= 0:  # dual tensors: the Function's jvp carries tangents
                return _EagerTrainingBatchNorm2d.apply(*tensors, momentum, eps)
            return _training_forward(*tensors, momentum, eps)[0]
        if needs_grad or forward_ad._current_level >= 0:  # dual tensors: the Function's jvp carries their tangents
            return _EagerBatchNorm2d.apply(*tensors, eps)
        return _forward(*tensors, eps)
    if not torch.compiler.is_compiling() and torch._C._are_functorch_transforms_active():
        interpreter = torch._C._functorch.peek_interpreter_stack()
        if interpreter is not None and interpreter.key() == torch._C._functorch.TransformType.Jvp:
            raise NotImplementedError("rust_kernels.torch.batch_norm_2d: torch.func.jvp is not implemented "
                                      "(forward-mode AD through torch.autograd.forward_ad is)")  # fmt: skip
    return _ops.batch_norm_2d_forward(*tensors, training, momentum, eps)[0]


def _channels_last(x: Tensor) -> bool:
    return not x.is_contiguous() and x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last)


class _OurNormalization:
    """What our batch-norm modules share (mixed into subclasses of torch's _BatchNorm): when our kernels normalise
    an input, the normalisation on this rank's batch alone, and the running statistics' update factor."""

    training: bool
    momentum: float | None
    eps: float
    weight: Tensor | None
    bias: Tensor | None
    running_mean: Tensor | None
    running_var: Tensor | None
    num_batches_tracked: Tensor | None

    def _factor(self) -> float | Tensor:
        """Counts this training batch in num_batches_tracked (where there is one) and returns the running
        statistics' update factor: momentum, or with momentum=None the cumulative average's 1 / num_batches_tracked
        (as torch computes it), a 0-d float64 tensor: reading it would synchronise with the device."""
        if self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                return self.num_batches_tracked.double().reciprocal()
        return 0.0 if self.momentum is None else self.momentum

    def _normalize(self, input: torch.Tensor) -> torch.Tensor:
        self._check_input_dim(input)  # type: ignore[attr-defined]
        if self.running_mean is None or self.running_var is None:
            # No running statistics (track_running_stats=False): the batch's in both modes; the kernels' update of
            # running statistics goes to scratch buffers (momentum 0), in the parameters' dtype.
            like = input if self.weight is None else self.weight
            channels = input.shape[1]
            scratch = (like.new_zeros(channels), like.new_ones(channels))
            return batch_norm_2d(input, *scratch, self.weight, self.bias, True, 0.0, self.eps)
        if not self.training:
            return batch_norm_2d(input, self.running_mean, self.running_var, self.weight, self.bias, eps=self.eps)  # type: ignore[arg-type]
        momentum = float(self._factor())  # the kernels take it as a scalar
        return batch_norm_2d(input, self.running_mean, self.running_var, self.weight, self.bias, True, momentum,  # type: ignore[arg-type]
                             self.eps)  # fmt: skip


class BatchNorm2d(_OurNormalization, torch.nn.BatchNorm2d):
    """torch.nn.BatchNorm2d (same constructor, parameters, buffers and state_dict) on our kernels: training mode
    normalises with the batch statistics and updates the running statistics (momentum, or with momentum=None the
    cumulative average over num_batches_tracked, as torch does); eval mode normalises with the running statistics;
    both NCHW or channels_last, the output in the input's memory format (no layout change). Our backward kernels
    run under autograd in both modes.

    Inputs in f32, f64, bf16 or f16, with the parameters in the same dtype or, for bf16/f16 inputs, in f32 (as
    torch.autocast leaves them). A module without running statistics (track_running_stats=False) normalises with
    the batch's in both modes, as torch's."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return self._normalize(input)


# --- SyncBatchNorm ----------------------------------------------------------------------------------------------------
def _merge(gathered: Tensor, channels: int) -> tuple[Tensor, Tensor, Tensor]:
    """The whole batch's (count, mean, M2) per channel from every rank's row of `gathered` ([world, 2C + 1]: mean,
    M2, count): Chan et al.'s parallel merge, M2 = sum M2_r + sum n_r (mean_r - mean)^2, exact for any counts (an
    empty rank's count is 0, its mean and M2 zeros). Tensor ops on the device: no host synchronisation."""
    means, m2s, counts = gathered.split((channels, channels, 1), dim=1)
    total = counts.sum(0)
    mean = (counts * means).sum(0) / total
    return total, mean, (m2s + counts * (means - mean) ** 2).sum(0)


def _update(running: Tensor | None, value: Tensor, momentum: float | Tensor) -> None:
    """running = (1 - momentum) * running + momentum * value, in the accumulation type (as our kernels update it)."""
    if running is not None:
        running.copy_(running.to(value.dtype) * (1 - momentum) + value * momentum)


def _sync(op: Op, *tensors: Tensor) -> Any:
    """A SyncBatchNorm op: its kernels directly where run eagerly, else (torch.compile tracing the Function) its
    operator."""
    return call(op, *tensors) if _eager(tensors) else getattr(_ops, op.name)(*tensors)


class _SyncBatchNorm2d(torch.autograd.Function):
    """A SyncBatchNorm training step over the ranks of `group` on our kernels (sync.py's ops), as torch's: this
    rank's (mean, M2, count) -> one all_gather -> the merged statistics (the running ones updated: unbiased variance)
    -> y; backward: this rank's sums -> one all_reduce -> dx, with this rank's dweight and dbias (DDP reduces
    those). Every rank runs both collectives, an empty part of the batch too (zeros)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, bias: Tensor, running_mean: Tensor | None,
                running_var: Tensor | None, momentum: float | Tensor, eps: float, group: Any) -> Tensor:  # fmt: skip
        mean, m2 = _sync(sync.MOMENTS, x)
        channels = x.shape[1]
        count = torch.full((1,), x.numel() // channels, dtype=mean.dtype, device=mean.device)
        gathered = torch.empty(dist.get_world_size(group) * (2 * channels + 1), dtype=mean.dtype, device=mean.device)
        dist.all_gather_into_tensor(gathered, torch.cat((mean, m2, count)), group=group)
        total, mean, m2 = _merge(gathered.view(-1, 2 * channels + 1), channels)
        invstd = torch.rsqrt(m2 / total + eps)
        _update(running_mean, mean, momentum)
        _update(running_var, m2 / (total - 1), momentum)
        ctx.save_for_backward(x, weight, mean, invstd, total)
        ctx.group = group
        return _sync(sync.NORMALIZE, x, weight, bias, mean, invstd)  # type: ignore[no-any-return]

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, dy: Tensor) -> tuple[Tensor | None, ...]:
        x, weight, mean, invstd, total = ctx.saved_tensors
        dy = _in_format(dy, x)
        dweight, dbias, sums = _sync(sync.BACKWARD_SUMS, dy, x, weight, mean, invstd)
        dx = None
        if ctx.needs_input_grad[0]:  # as torch's: the ranks meet where x needs its gradient
            dist.all_reduce(sums, group=ctx.group)
            dx = _sync(sync.BACKWARD_DX, dy, x, weight, mean, invstd, sums / total)
        need = ctx.needs_input_grad
        return dx, dweight if need[1] else None, dbias if need[2] else None, None, None, None, None, None


class SyncBatchNorm(_OurNormalization, torch.nn.SyncBatchNorm):
    """torch.nn.SyncBatchNorm (same constructor, parameters, buffers, state_dict and process_group) on our kernels,
    for [B, C, H, W] inputs, NCHW or channels_last. Training with an initialised process group of more than one rank
    normalises with the statistics of the whole batch, every rank's part (uneven or empty parts alike): this rank's
    per-channel (count, mean, M2) gathered in one collective and merged, and in the backward one all_reduce of the
    per-channel sums; torch.distributed's collectives (NCCL on GPUs, gloo on the CPU, which torch's own
    SyncBatchNorm refuses), no host synchronisation (CUDA graphs capture a step), traced whole by torch.compile (the
    per-rank ops as operators, the collectives as functional ones). Each rank's dweight and dbias are
    its own part's, as torch's (DDP reduces them). Otherwise (eval mode, no process group, one rank) it normalises
    as rust_kernels.torch.BatchNorm2d does, with no communication, and torch's implementation runs other ranks of
    input."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        group = self._group()
        if input.dim() != 4:
            return super().forward(input)
        if group is None:
            return self._normalize(input)
        self._check_non_zero_input_channels(input)
        momentum = self._factor() if self.track_running_stats else 0.0
        running = (self.running_mean, self.running_var) if self.track_running_stats else (None, None)
        weight = self.weight if self.weight is not None else input.new_ones(input.shape[1])  # affine=False
        bias = self.bias if self.bias is not None else torch.zeros_like(weight)
        return _SyncBatchNorm2d.apply(input, weight, bias, *running, momentum, self.eps, group)  # type: ignore[no-any-return]

    def _group(self) -> Any:
        """The process group whose ranks' batch a training step normalises over; None (this rank's batch alone) in
        eval mode, without an initialised process group or with one of a single rank, as torch's."""
        if not self.training or not dist.is_available() or not dist.is_initialized():
            return None
        group = self.process_group or dist.group.WORLD
        return group if dist.get_world_size(group) > 1 else None

    @classmethod
    def convert_sync_batchnorm(cls, module: torch.nn.Module, process_group: Any = None) -> torch.nn.Module:
        """torch.nn.SyncBatchNorm.convert_sync_batchnorm (every batch norm in `module` a SyncBatchNorm sharing its
        parameters and buffers, `module` itself included), the SyncBatchNorms of this class."""
        converted = torch.nn.SyncBatchNorm.convert_sync_batchnorm(module, process_group)
        for m in converted.modules():
            if type(m) is torch.nn.SyncBatchNorm:
                m.__class__ = cls
        return converted


# --- BatchNorm2d with its activation fused ------------------------------------------------------------------------
class _EagerFusedBatchNorm2d(torch.autograd.Function):
    """A training step of act(BatchNorm2d(x)) on the fused ops' kernels (activation.py) under a plain
    autograd.Function: the backward recomputes the activation's input from x, so nothing more is saved."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, bias: Tensor, running_mean: Tensor, running_var: Tensor,
                momentum: float, eps: float, act: str) -> Tensor:  # fmt: skip
        y, save_mean, save_invstd = call(activation.FORWARD, x, weight, bias, running_mean, running_var, momentum,
                                         eps, act)  # fmt: skip
        ctx.save_for_backward(x, weight, bias, save_mean, save_invstd)
        ctx.eps, ctx.act = eps, act
        _keep_for_tangent(ctx, x, weight, bias, save_mean, save_invstd)
        return y  # type: ignore[no-any-return]

    @staticmethod
    def jvp(ctx: Any, dx: Tensor | None, dweight: Tensor | None, dbias: Tensor | None, *_: Any) -> Tensor:
        z, dz = differentiable.training_tangent(*ctx.primals, dx, dweight, dbias)
        return differentiable.activation_tangent(ctx.act, z, dz).to(ctx.primals[0].dtype)

    @staticmethod
    def backward(ctx: Any, dy: Tensor) -> tuple[Tensor | None, ...]:
        x, weight, bias, save_mean, save_invstd = ctx.saved_tensors
        tensors = (_in_format(dy, x), x, weight, bias, save_mean, save_invstd)
        return (*_gradients(ctx, activation.BACKWARD, tensors, (ctx.eps, ctx.act)), None, None, None, None, None)


class _EagerFrozenFusedBatchNorm2d(torch.autograd.Function):
    """act(BatchNorm2d(x)) in eval mode on the fused ops' kernels (frozen_fused.py) under a plain autograd.Function:
    the backward recomputes the activation's input from x, so nothing more is saved."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, bias: Tensor, running_mean: Tensor, running_var: Tensor,
                eps: float, act: str) -> Tensor:  # fmt: skip
        ctx.save_for_backward(x, weight, bias, running_mean, running_var)
        ctx.eps, ctx.act = eps, act
        return call(frozen_fused.ACT_FORWARD, x, weight, bias, running_mean, running_var, eps, act)  # type: ignore[no-any-return]

    @staticmethod
    def backward(ctx: Any, dy: Tensor) -> tuple[Tensor | None, ...]:
        x, *rest = ctx.saved_tensors
        tensors = (_in_format(dy, x), x, *rest)
        return (*_gradients(ctx, frozen_fused.ACT_BACKWARD, tensors, (ctx.eps, ctx.act)), None, None, None, None)


def batch_norm_act_2d(x: Tensor, running_mean: Tensor, running_var: Tensor, weight: Tensor | None = None,
                      bias: Tensor | None = None, momentum: float = 0.1, eps: float = 1e-5, act: str = "relu",
                      training: bool = True) -> Tensor:  # fmt: skip
    """act(torch.nn.functional.batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps)), act
    "relu", "silu", "relu6" or "hardswish", on the fused kernels. Training mode: one pass fewer forward and the
    activation's own backward passes saved; running statistics updated in place. Eval mode (training=False): frozen
    running statistics, one pass over the activations forward and backward where BN and act apart take two (under
    forward-mode AD, BN then act). x NCHW or channels_last (y in x's memory format)."""
    if weight is None:
        weight = torch.ones_like(running_var)
    if bias is None:
        bias = torch.zeros_like(running_mean)
    tensors = (x, weight, bias, running_mean, running_var)
    if not training:
        if not _eager(tensors):
            return _ops.batch_norm_2d_act_eval_forward(*tensors, eps, act)  # type: ignore[no-any-return]
        if forward_ad._current_level >= 0:  # dual tensors: the eval Function's jvp carries their tangents
            return _APPLY[act](batch_norm_2d(x, running_mean, running_var, weight, bias, False, momentum, eps))
        if _needs_grad(x, weight, bias):
            return _EagerFrozenFusedBatchNorm2d.apply(*tensors, eps, act)  # type: ignore[no-any-return]
        return call(frozen_fused.ACT_FORWARD, *tensors, eps, act)  # type: ignore[no-any-return]
    if _eager(tensors):
        needs_grad = _needs_grad(x, weight, bias)
        if needs_grad or forward_ad._current_level >= 0:  # dual tensors: the Function's jvp carries tangents
            return _EagerFusedBatchNorm2d.apply(*tensors, momentum, eps, act)  # type: ignore[no-any-return]
        return call(activation.FORWARD, *tensors, momentum, eps, act)[0]  # type: ignore[no-any-return]
    return _ops.batch_norm_2d_act_forward(*tensors, momentum, eps, act)[0]  # type: ignore[no-any-return]


class _EagerResidualBatchNorm2d(torch.autograd.Function):
    """A training step of relu(BatchNorm2d(x) + residual) on the fused ops' kernels (families/batch_norm/residual.py)
    under a plain autograd.Function: the backward's mask is read from y, saved as torch's ReLU saves its output."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, residual: Tensor, weight: Tensor, bias: Tensor, running_mean: Tensor,
                running_var: Tensor, momentum: float, eps: float) -> Tensor:  # fmt: skip
        y, save_mean, save_invstd = call(add_relu.FORWARD, x, residual, weight, bias, running_mean, running_var,
                                         momentum, eps)  # fmt: skip
        ctx.save_for_backward(y, x, weight, save_mean, save_invstd)
        ctx.eps = eps
        _keep_for_tangent(ctx, x, weight, bias, save_mean, save_invstd)
        ctx.y = y if forward_ad._current_level >= 0 else None
        return y  # type: ignore[no-any-return]

    @staticmethod
    def jvp(ctx: Any, dx: Tensor | None, dresidual: Tensor | None, dweight: Tensor | None, dbias: Tensor | None,
            *_: Any) -> Tensor:  # fmt: skip
        dz = differentiable.training_tangent(*ctx.primals, dx, dweight, dbias)[1]
        if dresidual is not None:
            dz = dz + dresidual.to(dz.dtype)
        return ((ctx.y > 0) * dz).to(ctx.y.dtype)  # type: ignore[no-any-return]

    @staticmethod
    def backward(ctx: Any, dy: Tensor) -> tuple[Tensor | None, ...]:
        y, x, weight, save_mean, save_invstd = ctx.saved_tensors
        tensors = (_in_format(dy, x), y, x, weight, save_mean, save_invstd)
        # dx, dresidual, dweight, dbias: the forward's x, residual, weight, bias
        return (*_gradients(ctx, add_relu.BACKWARD, tensors, (ctx.eps,)), None, None, None, None)


class _EagerFrozenResidualBatchNorm2d(torch.autograd.Function):
    """relu(BatchNorm2d(x) + residual) in eval mode on the fused ops' kernels (frozen_fused.py) under a plain
    autograd.Function: the backward's mask is read from y, saved as torch's ReLU saves its output."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, residual: Tensor, weight: Tensor, bias: Tensor, running_mean: Tensor,
                running_var: Tensor, eps: float) -> Tensor:  # fmt: skip
        y = call(frozen_fused.ADD_RELU_FORWARD, x, residual, weight, bias, running_mean, running_var, eps)
        ctx.save_for_backward(y, x, weight, running_mean, running_var)
        ctx.eps = eps
        return y  # type: ignore[no-any-return]

    @staticmethod
    def backward(ctx: Any, dy: Tensor) -> tuple[Tensor | None, ...]:
        y, x, *rest = ctx.saved_tensors
        tensors = (_in_format(dy, x), y, x, *rest)
        # dx, dresidual, dweight, dbias: the forward's x, residual, weight, bias
        return (*_gradients(ctx, frozen_fused.ADD_RELU_BACKWARD, tensors, (ctx.eps,)), None, None, None)


def batch_norm_add_relu_2d(x: Tensor, residual: Tensor, running_mean: Tensor, running_var: Tensor,
                           weight: Tensor | None = None, bias: Tensor | None = None, momentum: float = 0.1,
                           eps: float = 1e-5, training: bool = True) -> Tensor:  # fmt: skip
    """relu(torch.nn.functional.batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps) +
    residual), the end of a ResNet block, on the fused kernels. Training mode: 4 passes forward where the three ops
    take 8; running statistics updated in place. Eval mode (training=False): frozen running statistics, 3 passes
    forward where the three ops take 7 (under forward-mode AD, the three apart). x and residual of one shape, dtype
    and memory format (NCHW or channels_last; y in x's)."""
    if weight is None:
        weight = torch.ones_like(running_var)
    if bias is None:
        bias = torch.zeros_like(running_mean)
    tensors = (x, residual, weight, bias, running_mean, running_var)
    if not training:
        if not _eager(tensors):
            return _ops.batch_norm_2d_add_relu_eval_forward(*tensors, eps)  # type: ignore[no-any-return]
        if forward_ad._current_level >= 0:  # dual tensors: the eval Function's jvp carries their tangents
            z = batch_norm_2d(x, running_mean, running_var, weight, bias, False, momentum, eps)
            return torch.relu(z + residual)
        if _needs_grad(*tensors[:4]):
            return _EagerFrozenResidualBatchNorm2d.apply(*tensors, eps)  # type: ignore[no-any-return]
        return call(frozen_fused.ADD_RELU_FORWARD, *tensors, eps)  # type: ignore[no-any-return]
    if _eager(tensors):
        if _needs_grad(*tensors[:4]) or forward_ad._current_level >= 0:
            return _EagerResidualBatchNorm2d.apply(*tensors, momentum, eps)  # type: ignore[no-any-return]
        return call(add_relu.FORWARD, *tensors, momentum, eps)[0]  # type: ignore[no-any-return]
    return _ops.batch_norm_2d_add_relu_forward(*tensors, momentum, eps)[0]  # type: ignore[no-any-return]


# The activations the fused kernels compute: their modules, and the functions and tensor methods torch.fx records.
_ACTIVATION_MODULES = {torch.nn.ReLU: "relu", torch.nn.SiLU: "silu", torch.nn.ReLU6: "relu6",
                       torch.nn.Hardswish: "hardswish"}  # fmt: skip
_ACTIVATION_FUNCTIONS = {torch.nn.functional.relu: "relu", torch.relu: "relu", torch.relu_: "relu",
                         torch.nn.functional.silu: "silu", torch.nn.functional.relu6: "relu6",
                         torch.nn.functional.hardswish: "hardswish"}  # fmt: skip
_ACTIVATION_METHODS = {"relu": "relu", "relu_": "relu"}
_APPLY = {"relu": torch.relu, "silu": torch.nn.functional.silu, "relu6": torch.nn.functional.relu6,
          "hardswish": torch.nn.functional.hardswish}  # fmt: skip


class _FusingNormalization(BatchNorm2d):
    """Our BatchNorm2d followed by activation `act`, where our kernels normalise the input: on the fused kernels in
    both modes, else (without running statistics) our normalisation and then the activation."""

    def _then(self, input: torch.Tensor, act: str) -> torch.Tensor:
        if self.running_mean is None or self.running_var is None:
            return _APPLY[act](self._normalize(input))
        self._check_input_dim(input)
        momentum = float(self._factor()) if self.training else 0.0  # the kernels take it as a scalar
        return batch_norm_act_2d(input, self.running_mean, self.running_var, self.weight, self.bias, momentum,  # type: ignore[arg-type]
                                 self.eps, act, self.training)  # fmt: skip


class _BatchNormAct2d(_FusingNormalization):
    """timm's BatchNormAct2d (a torch.nn.BatchNorm2d with `drop` and `act` modules after it) on our kernels: with no
    drop (nn.Identity) and act nn.ReLU, nn.SiLU, nn.ReLU6 or nn.Hardswish, BatchNorm2d and the activation fused (both
    modes); otherwise our normalisation, then its own drop and activation."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        act = _ACTIVATION_MODULES.get(type(self.act))
        if act is not None and type(self.drop) is torch.nn.Identity:
            return self._then(input, act)
        return self.act(self.drop(self._normalize(input)))


class FusedBatchNorm2d(_FusingNormalization):
    """What `convert(model, fuse=True)` makes of a BatchNorm2d whose output only feeds an activation it fuses
    (`activation`: "relu", "silu", "relu6" or "hardswish"; the activation's call is then gone from the traced graph):
    the same parameters, buffers and state_dict, y = act(BatchNorm2d(x))."""

    activation: str

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return self._then(input, self.activation)


class FusedBatchNorm2dAddReLU(BatchNorm2d):
    """What `convert(model, fuse=True)` makes of a BatchNorm2d whose output is only added to another tensor, the sum
    feeding only a ReLU (the end of a ResNet block: bn3, `out += identity`, relu): the same parameters, buffers and
    state_dict, forward(input, residual) = relu(BatchNorm2d(input) + residual), on the fused kernels in both modes.
    Where those do not apply (no running statistics, a residual of another shape or dtype, a tensor of another rank)
    our BatchNorm2d, then torch's add and ReLU."""

    def forward(self, input: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        if (self.running_mean is None or self.running_var is None or input.dim() != 4
                or residual.shape != input.shape or residual.dtype != input.dtype):  # fmt: skip
            return torch.relu(self._normalize(input) + residual)
        self._check_input_dim(input)
        momentum = float(self._factor()) if self.training else 0.0  # the kernels take it as a scalar
        return batch_norm_add_relu_2d(input, _in_format(residual, input), self.running_mean, self.running_var,
                                      self.weight, self.bias, momentum, self.eps, self.training)  # fmt: skip


class _FrozenBatchNorm2d(torch.nn.Module):
    """torchvision's FrozenBatchNorm2d (weight, bias, running_mean, running_var as buffers, `eps`) on our eval-mode
    kernels for [B, C, H, W] inputs, NCHW or channels_last (its own forward for other ranks)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if input.dim() != 4:
            return super().forward(input)  # type: ignore[no-any-return]
        return batch_norm_2d(input, self.running_mean, self.running_var, self.weight, self.bias, eps=self.eps)


class _FusedFrozenBatchNorm2d(_FrozenBatchNorm2d):
    """What `convert(model, fuse=True)` makes of a converted FrozenBatchNorm2d whose output feeds only an activation
    it fuses (`activation`), or, called with a residual, is only added to it, the sum feeding only a ReLU: the
    eval-mode fused kernels (its own forward, then the activation or the add and ReLU, for other ranks or a
    residual of another shape or dtype)."""

    activation: str

    def forward(self, input: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:  # type: ignore[override]
        statistics = (self.running_mean, self.running_var, self.weight, self.bias)
        if residual is None:
            if input.dim() != 4:
                return _APPLY[self.activation](super().forward(input))
            return batch_norm_act_2d(input, *statistics, eps=self.eps, act=self.activation, training=False)
        if input.dim() != 4 or residual.shape != input.shape or residual.dtype != input.dtype:
            return torch.relu(super().forward(input) + residual)
        return batch_norm_add_relu_2d(input, _in_format(residual, input), *statistics, eps=self.eps, training=False)


def _converted_class(module: torch.nn.Module) -> type | None:
    """The class `module` becomes, or None where convert leaves it alone."""
    kind = type(module)
    if kind is torch.nn.BatchNorm2d:
        return BatchNorm2d
    if kind is torch.nn.SyncBatchNorm:
        return SyncBatchNorm
    if kind.__name__ == "BatchNormAct2d" and isinstance(module, torch.nn.BatchNorm2d) and hasattr(module, "act") \
            and hasattr(module, "drop"):  # fmt: skip
        return _subclass(kind, _BatchNormAct2d)
    names = ("weight", "bias", "running_mean", "running_var")
    if kind.__name__ == "FrozenBatchNorm2d" and all(n in module._buffers for n in names) and hasattr(module, "eps"):
        return _subclass(kind, _FrozenBatchNorm2d)
    return None


_SUBCLASSES: dict[tuple[type, type], type] = {}


def _subclass(kind: type, ours: type) -> type:
    """`kind` with our forward (`ours` first in the MRO), one class per kind; already converted: itself."""
    if issubclass(kind, ours):
        return kind
    if (kind, ours) not in _SUBCLASSES:
        _SUBCLASSES[(kind, ours)] = type(kind.__name__, (ours, kind), {"__module__": __name__})
    return _SUBCLASSES[(kind, ours)]


def convert(model: torch.nn.Module, fuse: bool = False) -> torch.nn.Module:
    """Makes every torch.nn.BatchNorm2d in `model` (the model itself included) a rust_kernels BatchNorm2d, and every
    torch.nn.SyncBatchNorm a rust_kernels SyncBatchNorm, in place, and returns `model`; timm's BatchNormAct2d gets our
    kernels (with ReLU, SiLU, ReLU6 or Hardswish and no drop, the normalisation and activation fused in both modes; else
    our normalisation before its own drop and activation), and torchvision's FrozenBatchNorm2d our eval-mode kernels.
    The modules stay the same objects, only their class changes (as torch's lazy modules do), so parameters (the
    optimizer's references too), buffers, device, dtype, requires_grad, hooks, process groups and train/eval state are
    kept. Other subclasses of torch.nn.BatchNorm2d are left alone (their forward may differ), and so are other batch
    norms (BatchNorm1d, a user's subclass): a warning counts what was left, never silently.

    fuse=True then traces the model with torch.fx and returns the traced GraphModule (the same submodules,
    parameters and buffers; the model's own hooks are not carried), in which each BatchNorm2d called once whose
    output feeds only a ReLU, SiLU, ReLU6 or Hardswish (module, function or tensor method) is a FusedBatchNorm2d and
    that activation call is gone, and each whose output is only added to one other tensor, the sum feeding only a
    ReLU, a FusedBatchNorm2dAddReLU called with the residual where the ReLU was; a FrozenBatchNorm2d so followed runs
    the eval-mode fused kernels likewise. A model torch.fx cannot trace is an error naming why (convert it without
    fuse)."""
    left: Counter[str] = Counter()
    for module in model.modules():
        target = _converted_class(module)
        if target is not None:
            module.__class__ = target
        elif not isinstance(module, BatchNorm2d | SyncBatchNorm | _FrozenBatchNorm2d) and _is_batch_norm(module):
            left[type(module).__name__] += 1
    if left:
        kinds = ", ".join(f"{count} {name}" for name, count in left.items())
        warnings.warn(f"rust_kernels.torch.convert: left {sum(left.values())} batch-norm module(s) to their own "
                      f"implementation: {kinds}", stacklevel=2)  # fmt: skip
    return _fused(model) if fuse else model


class _Tracer(torch.fx.Tracer):
    """torch.fx's tracer with our batch norms as leaves (calls in the graph, as torch.nn's modules are), not traced
    through: their forward branches on the input's memory format and mode."""

    def is_leaf_module(self, m: torch.nn.Module, module_qualified_name: str) -> bool:
        return isinstance(m, _OurNormalization | _FrozenBatchNorm2d) or super().is_leaf_module(m, module_qualified_name)


def _fused(model: torch.nn.Module) -> torch.fx.GraphModule:
    """The model traced, each BatchNorm2d -> activation pair of its graph one FusedBatchNorm2d call."""
    try:
        traced = torch.fx.GraphModule(model, _Tracer().trace(model))
    except Exception as err:  # fx raises many kinds (TraceError, TypeError on data-dependent control flow, ...)
        why = f"{type(err).__name__}: {err}"
        raise RustKernelsError(f"convert(fuse=True): torch.fx cannot trace {type(model).__name__} ({why}); "
                               "convert(model) without fuse converts it unfused") from None  # fmt: skip
    modules = dict(traced.named_modules())
    calls = Counter(node.target for node in traced.graph.nodes if node.op == "call_module")
    graph = traced.graph
    for node in list(graph.nodes):
        if node.op != "call_module" or not _fusable(modules[node.target]) or calls[node.target] != 1:
            continue
        if len(node.users) != 1 or len(node.args) != 1 or node.kwargs:
            continue
        (user,) = node.users
        module = modules[node.target]
        other = _residual_of(user, node)
        if other is not None and len(user.users) == 1 and _activation_call(next(iter(user.users)), user, modules) == \
                "relu":  # fmt: skip
            # bn -> add -> relu: one call where the ReLU was (the residual may be computed after the BN).
            (relu,) = user.users
            with graph.inserting_before(relu):
                fused = graph.call_module(node.target, (node.args[0], other))
            relu.replace_all_uses_with(fused)
            for gone in (relu, user, node):
                graph.erase_node(gone)
            _fuse(module, FusedBatchNorm2dAddReLU)
            continue
        act = _activation_call(user, node, modules)
        if act is None:
            continue
        _fuse(module, FusedBatchNorm2d, act)
        user.replace_all_uses_with(node)
        graph.erase_node(user)
    graph.lint()
    traced.recompile()
    return traced


def _fusable(module: torch.nn.Module) -> bool:
    """Our BatchNorm2d (not a subclass), or a converted FrozenBatchNorm2d not yet fused."""
    return type(module) is BatchNorm2d or (isinstance(module, _FrozenBatchNorm2d) and
                                           not isinstance(module, _FusedFrozenBatchNorm2d))  # fmt: skip


def _fuse(module: torch.nn.Module, fused: type, activation: str | None = None) -> None:
    """Makes `module` (a _fusable one) the fused class of its kind: `fused` for our BatchNorm2d, else a fused
    FrozenBatchNorm2d; `activation`: the one it fuses (none: the add and ReLU, called with the residual)."""
    module.__class__ = fused if type(module) is BatchNorm2d else _subclass(type(module), _FusedFrozenBatchNorm2d)
    if activation is not None:
        module.activation = activation


def _activation_call(user: torch.fx.Node, of: torch.fx.Node, modules: dict[str, torch.nn.Module]) -> str | None:
    """The fused activation `user` computes of node `of` alone (its other arguments, such as inplace, no tensors),
    or None."""
    if user.args[:1] != (of,) or any(isinstance(a, torch.fx.Node) for a in (*user.args[1:], *user.kwargs.values())):
        return None
    if user.op == "call_module":
        return _ACTIVATION_MODULES.get(type(modules[user.target]))  # type: ignore[index]
    if user.op == "call_function":
        return _ACTIVATION_FUNCTIONS.get(user.target)  # type: ignore[call-overload]
    if user.op == "call_method":
        return _ACTIVATION_METHODS.get(user.target)  # type: ignore[call-overload]
    return None


# The additions torch.fx records: `a + b`, `out += identity`, torch.add, and the tensor methods.
_ADDITIONS = {operator.add, operator.iadd, torch.add}
_ADDITION_METHODS = {"add", "add_"}


def _residual_of(user: torch.fx.Node, of: torch.fx.Node) -> torch.fx.Node | None:
    """The other operand where `user` adds node `of` and one other node (no alpha, no out=), else None."""
    added = (user.op == "call_function" and user.target in _ADDITIONS) or \
        (user.op == "call_method" and user.target in _ADDITION_METHODS)  # fmt: skip
    if not added or user.kwargs or len(user.args) != 2 or not all(isinstance(a, torch.fx.Node) for a in user.args):
        return None
    a, b = user.args
    if (a is of) == (b is of):  # neither, or the BN's output added to itself
        return None
    return b if a is of else a  # type: ignore[return-value]


def _is_batch_norm(module: torch.nn.Module) -> bool:
    """A batch norm of any kind: torch's (and its subclasses) or another library's that names itself so."""
    return isinstance(module, torch.nn.modules.batchnorm._NormBase) or "BatchNorm" in type(module).__name__
