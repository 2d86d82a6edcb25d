"""`BatchNorm2d`, torch.nn.BatchNorm2d on rust_kernels' kernels, `batch_norm_2d` (its functional form, eval and
training mode) and `convert(model)`.

Eagerly, on plain CPU/CUDA tensors, batch_norm_2d skips the dispatcher: the ops' kernels under a plain
autograd.Function (torch.library's Python autograd and dispatch cost a model step about 0.2 ms of host time per
BatchNorm2d, measured on the H200). Under torch.compile, tracing, functorch transforms, forward-mode AD or with tensor
subclasses it calls the operators (torch.ops.rust_kernels), whose fakes and autograd come from the declarations.
"""

from __future__ import annotations

import warnings
from collections import Counter
from typing import Any

import torch
from torch.autograd import forward_ad

from rust_kernels.families.batch_norm import backward, forward
from rust_kernels.torch import library

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


def _forward(x: Tensor, weight: Tensor, bias: Tensor, running_mean: Tensor, running_var: Tensor, eps: float) -> Tensor:
    """The forward op on plain eager tensors: its fast path, else the op as the operator runs it."""
    tensors = (x, weight, bias, running_mean, running_var)
    y = forward.NCHW.fast(tensors, (eps, None))  # the op's scalars: eps, block_hw
    return library.call(forward.NCHW, *tensors, eps) if y is None else y


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
        if torch.is_grad_enabled():  # create_graph: the operator, so that double backward is refused as it refuses
            out = _ops.batch_norm_2d_backward(dy, *ctx.saved_tensors, None, None, False, ctx.eps)
        else:
            saved = ctx.saved_tensors
            out = backward.NCHW.fast((dy, *saved), (ctx.eps, None, True))  # the op's scalars, as called below
            if out is None:
                out = library.call(backward.NCHW, dy, *saved, ctx.eps)
        return (*(g if n else None for g, n in zip(out, need, strict=True)), None, None, None)


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
        return y

    @staticmethod
    def backward(ctx: Any, dy: Tensor) -> tuple[Tensor | None, ...]:
        x, weight, save_mean, save_invstd = ctx.saved_tensors
        tensors = (_in_format(dy, x), x, weight, *ctx.statistics, save_mean, save_invstd)
        if torch.is_grad_enabled():  # create_graph: the operator, which refuses double backward
            out = _ops.batch_norm_2d_backward(*tensors, True, ctx.eps)
        else:
            out = backward.NATIVE.fast(tensors, (True, ctx.eps, True))  # the op's scalars: training, eps, deterministic
            if out is None:
                out = library.call(backward.NATIVE, *tensors, True, ctx.eps)
        need = ctx.needs_input_grad[:3]
        return (*(g if n else None for g, n in zip(out, need, strict=True)), None, None, None, None)


def _training_forward(x: Tensor, weight: Tensor, bias: Tensor, running_mean: Tensor, running_var: Tensor,
                      momentum: float, eps: float) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    tensors = (x, weight, bias, running_mean, running_var)
    out = forward.NATIVE.fast(tensors, (True, momentum, eps))  # the op's scalars: training, momentum, eps
    return library.call(forward.NATIVE, *tensors, True, momentum, eps) if out is None else out


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
    shape [B, C, H, W], on our kernels (forward, and backward through autograd). Eval mode: frozen running
    statistics, x NCHW. Training mode: batch statistics, running_mean and running_var updated in place, x NCHW or
    channels_last (y in x's memory format). A missing weight or bias is one or zero. Eager calls on plain tensors run
    the kernels directly (host cost); others go through torch.ops.rust_kernels."""
    if weight is None:
        weight = torch.ones_like(running_var)
    if bias is None:
        bias = torch.zeros_like(running_mean)
    tensors = (x, weight, bias, running_mean, running_var)
    if _eager(tensors):
        needs_grad = torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad or bias.requires_grad)
        if training:
            if forward_ad._current_level >= 0:
                raise NotImplementedError("rust_kernels.torch.batch_norm_2d: forward-mode AD in training mode is not "
                                          "implemented")  # fmt: skip
            if needs_grad:
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


class BatchNorm2d(torch.nn.BatchNorm2d):
    """torch.nn.BatchNorm2d (same constructor, parameters, buffers and state_dict) on our kernels: training mode
    normalises with the batch statistics and updates the running statistics (momentum, or with momentum=None the
    cumulative average over num_batches_tracked, as torch does), NCHW or channels_last; eval mode normalises with
    the running statistics, NCHW. Our backward kernels run under autograd in both modes.

    Inputs in f32, f64, bf16 or f16, with the parameters in the same dtype or, for bf16/f16 inputs, in f32 (as
    torch.autocast leaves them). torch's own implementation runs what our kernels do not: eval mode in
    channels_last (our eval kernels are NCHW: a copy to NCHW and back would make a converted channels_last model
    slower), and a module without running statistics (track_running_stats=False)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return self._normalize(input) if self._ours(input) else super().forward(input)

    def _ours(self, input: torch.Tensor) -> bool:
        """Whether our kernels normalise `input` (else torch's implementation does)."""
        missing = self.running_mean is None or self.running_var is None
        return not missing and (self.training or not _channels_last(input))

    def _normalize(self, input: torch.Tensor) -> torch.Tensor:
        self._check_input_dim(input)
        if not self.training:
            return batch_norm_2d(input, self.running_mean, self.running_var, self.weight, self.bias, eps=self.eps)
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # the cumulative moving average, as torch computes its factor
                momentum = 1.0 / float(self.num_batches_tracked)
        return batch_norm_2d(input, self.running_mean, self.running_var, self.weight, self.bias, True, momentum,
                             self.eps)  # fmt: skip


class _BatchNormAct2d(BatchNorm2d):
    """timm's BatchNormAct2d (a torch.nn.BatchNorm2d with `drop` and `act` modules after it) on our BatchNorm2d: the
    normalisation ours, then its own drop and activation (not fused into the kernel)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if not self._ours(input):
            return super(BatchNorm2d, self).forward(input)  # timm's own: normalisation, drop and activation
        return self.act(self.drop(self._normalize(input)))


class _FrozenBatchNorm2d(torch.nn.Module):
    """torchvision's FrozenBatchNorm2d (weight, bias, running_mean, running_var as buffers, `eps`) on our eval-mode
    kernels for NCHW inputs (its own forward for channels_last ones)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if _channels_last(input) or input.dim() != 4:
            return super().forward(input)  # type: ignore[no-any-return]
        return batch_norm_2d(input, self.running_mean, self.running_var, self.weight, self.bias, eps=self.eps)


def _converted_class(module: torch.nn.Module) -> type | None:
    """The class `module` becomes, or None where convert leaves it alone."""
    kind = type(module)
    if kind is torch.nn.BatchNorm2d:
        return BatchNorm2d
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


def convert(model: torch.nn.Module) -> torch.nn.Module:
    """Makes every torch.nn.BatchNorm2d in `model` (the model itself included) a rust_kernels BatchNorm2d, in place,
    and returns `model`; timm's BatchNormAct2d gets our normalisation before its own drop and activation, and
    torchvision's FrozenBatchNorm2d our eval-mode kernels. The modules stay the same objects, only their class
    changes (as torch's lazy modules do), so parameters (the optimizer's references too), buffers, device, dtype,
    requires_grad, hooks and train/eval state are kept. Other subclasses of torch.nn.BatchNorm2d are left alone
    (their forward may differ), and so are other batch norms (SyncBatchNorm): a warning counts what was left, never
    silently."""
    left: Counter[str] = Counter()
    for module in model.modules():
        target = _converted_class(module)
        if target is not None:
            module.__class__ = target
        elif not isinstance(module, BatchNorm2d | _FrozenBatchNorm2d) and _is_batch_norm(module):
            left[type(module).__name__] += 1
    if left:
        kinds = ", ".join(f"{count} {name}" for name, count in left.items())
        warnings.warn(f"rust_kernels.torch.convert: left {sum(left.values())} batch-norm module(s) to their own "
                      f"implementation: {kinds}", stacklevel=2)  # fmt: skip
    return model


def _is_batch_norm(module: torch.nn.Module) -> bool:
    """A batch norm of any kind: torch's (and its subclasses) or another library's that names itself so."""
    return isinstance(module, torch.nn.modules.batchnorm._NormBase) or "BatchNorm" in type(module).__name__
