"""The BatchNorm2d benchmarks (the eval ops, NCHW and channels_last, alone and with a ReLU or the residual add and
ReLU fused, forward and backward; training mode's forward + backward in NCHW and channels_last): bytes moved and the
baselines a user would pick instead."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from rust_kernels import ops
from rust_kernels.bench.baselines import Baseline, register
from rust_kernels.dtypes import DTYPES, activations
from rust_kernels.families.batch_norm.training import ACTIVATIONS

EPS = 1e-5


def _torch_activation(name: str) -> Callable[[Any], Any]:
    """PyTorch's function of a fused activation (one of ACTIVATIONS): the eager and compiled columns' maths."""
    import torch.nn.functional as F

    return {"relu": F.relu, "silu": F.silu, "relu6": F.relu6, "hardswish": F.hardswish}[name]


def _in_layout(channels_last: bool, *tensors: Any) -> list[Any]:
    """The tensors in channels_last memory format where asked, else as they are (contiguous)."""
    import torch

    return [t.contiguous(memory_format=torch.channels_last) if channels_last else t for t in tensors]


class _Eval(Baseline):
    """What the eval baselines share: the NCHW op's family, or with `channels_last` the torch-native op's eval
    family (`eval_family`) timed on channels_last arrays, as `channels_last_name`."""

    eval_family: str
    channels_last_name: str

    def __init__(self, channels_last: bool = False) -> None:
        self.channels_last = channels_last
        if channels_last:
            self.family = self.eval_family

    @property
    def name(self) -> str:
        return self.channels_last_name if self.channels_last else self.family


class Backward(_Eval):
    """The eval backward (frozen statistics): NCHW (batch_norm_2d_nchw_backward), or with `channels_last` the
    torch-native op's channels_last eval kernel on channels_last dy and x (its baselines run on them too)."""

    family = "batch_norm_2d_nchw_backward"
    eval_family = "batch_norm_2d_backward_eval"
    channels_last_name = "batch_norm_2d_eval_backward_channels_last"
    suite = "batch_norm_2d"
    bench_shapes = [(32, 256, 56, 56), (32, 64, 112, 112), (256, 64, 28, 28), (64, 512, 28, 28),  # noqa: RUF012
                    (32, 1024, 14, 14), (128, 128, 56, 56), (32, 2048, 7, 7), (8, 32, 8, 8)]  # fmt: skip

    def moved_bytes(self, shape: tuple[int, ...], dtype: str) -> int:
        """Read dy and x, write dx."""
        return 3 * math.prod(shape) * DTYPES[activations(dtype)].size

    def bench_calls(self, tensors: dict[str, Any]) -> dict[str, Callable[[], Any]]:
        import torch

        import rust_kernels.torch  # noqa: F401 (defines torch.ops.rust_kernels)

        dy, x, weight, mean, var = (tensors[n] for n in ("dy", "x", "weight", "running_mean", "running_var"))
        dy, x = _in_layout(self.channels_last, dy, x)
        # 0-element save_mean/save_invstd (train=False): PyTorch's CUDA kernel reads them in its accumulation type
        # (float32 for bf16/f16 inputs, else the input's), its CPU kernel in the input's dtype.
        acc = x.dtype if x.device.type == "cpu" or x.dtype == torch.float64 else torch.float32
        empty = torch.empty(0, device=x.device, dtype=acc)
        dx = torch.empty_like(x)

        def torch_eager() -> Any:
            return torch.ops.aten.native_batch_norm_backward(
                dy, x, weight, mean, var, empty, empty, False, EPS, [True, True, True]
            )

        def maths(dy: Any, x: Any, weight: Any, mean: Any, var: Any) -> Any:
            rstd = torch.rsqrt(var.float() + EPS)
            xhat = (x.float() - mean.float()[:, None, None]) * rstd[:, None, None]
            dyf = dy.float()
            dx = (dyf * (weight.float() * rstd)[:, None, None]).to(x.dtype)
            return dx, (dyf * xhat).sum((0, 2, 3)).to(x.dtype), dyf.sum((0, 2, 3)).to(x.dtype)

        compiled = torch.compile(maths, dynamic=False)
        op = ops.batch_norm_2d_nchw_backward
        ours = {
            "ours": lambda: op(dy, x, weight, mean, var, eps=EPS),
            "ours_atomic": lambda: op(dy, x, weight, mean, var, eps=EPS, deterministic=False),
            "ours_op": lambda: torch.ops.rust_kernels.batch_norm_2d_backward(dy, x, weight, mean, var),
        }
        if self.channels_last:
            native = ops.batch_norm_2d_backward
            ours = {
                "ours": lambda: native(dy, x, weight, mean, var, None, None, False, EPS),
                "ours_op": lambda: torch.ops.rust_kernels.batch_norm_2d_backward(dy, x, weight, mean, var),
            }
        return {
            **ours,
            "torch": torch_eager,
            "compile": lambda: compiled(dy, x, weight, mean, var),
            "bound": lambda: torch.add(x, dy, out=dx),
        }


class ForwardInference(_Eval):
    """The eval forward (frozen statistics): NCHW (batch_norm_2d_nchw_forward_inference), or with `channels_last`
    the torch-native op's channels_last eval kernel on a channels_last x (its baselines run on it too)."""

    family = "batch_norm_2d_nchw_forward_inference"
    eval_family = "batch_norm_2d_forward_eval"
    channels_last_name = "batch_norm_2d_eval_forward_channels_last"
    suite = "batch_norm_2d"
    bench_shapes = [(32, 256, 56, 56), (64, 512, 28, 28), (32, 1024, 14, 14), (32, 2048, 7, 7),  # noqa: RUF012
                    (8, 32, 8, 8)]  # fmt: skip

    def moved_bytes(self, shape: tuple[int, ...], dtype: str) -> int:
        """Read x, write y."""
        return 2 * math.prod(shape) * DTYPES[activations(dtype)].size

    def bench_calls(self, tensors: dict[str, Any]) -> dict[str, Callable[[], Any]]:
        import torch

        import rust_kernels.torch  # noqa: F401 (defines torch.ops.rust_kernels)

        x, weight, bias, mean, var = (tensors[n] for n in ("x", "weight", "bias", "running_mean", "running_var"))
        (x,) = _in_layout(self.channels_last, x)
        y = torch.empty_like(x)

        def maths(x: Any, weight: Any, bias: Any, mean: Any, var: Any) -> Any:
            scale = weight.float() * torch.rsqrt(var.float() + EPS)
            return ((x.float() - mean.float()[:, None, None]) * scale[:, None, None] + bias.float()[:, None, None]).to(
                x.dtype
            )

        compiled = torch.compile(maths, dynamic=False)
        op = ops.batch_norm_2d_nchw_forward_inference
        if self.channels_last:
            native = ops.batch_norm_2d_forward

            def op(x: Any, weight: Any, bias: Any, mean: Any, var: Any, eps: float) -> Any:
                return native(x, weight, bias, mean, var, False, 0.0, eps)[0]

        return {
            "ours": lambda: op(x, weight, bias, mean, var, eps=EPS),
            "ours_op": lambda: torch.ops.rust_kernels.batch_norm_2d_forward(
                x, weight, bias, mean, var, False, 0.0, EPS
            ),
            "torch": lambda: torch.nn.functional.batch_norm(x, mean, var, weight, bias, False, 0.0, EPS),
            "compile": lambda: compiled(x, weight, bias, mean, var),
            "bound": lambda: torch.neg(x, out=y),
        }


class Training(Baseline):
    """One training-mode BatchNorm2d forward + backward (what a training step runs per layer), NCHW or channels_last,
    alone or followed by an activation (registered with ReLU; another through with_activation): ours (the
    torch-native ops' kernels, or the fused act ops), PyTorch eager (F.batch_norm, then the activation, and their
    autograd backward), torch.compile of the same function (Inductor's forward and backward kernels) and an 8-pass
    copy (the bound: the fused kernels move no more)."""

    family = "batch_norm_2d_forward"
    suite = "batch_norm_2d"
    bench_shapes = [(32, 256, 56, 56), (128, 64, 112, 112), (256, 64, 28, 28), (64, 512, 28, 28),  # noqa: RUF012
                    (128, 1024, 14, 14), (128, 2048, 7, 7), (8, 32, 8, 8)]  # fmt: skip

    activations = tuple(ACTIVATIONS)

    def __init__(self, channels_last: bool, activation: str | None = None) -> None:
        self.channels_last = channels_last
        self.activation = activation  # fused after the normalisation: the act ops against BN then the activation

    @property
    def name(self) -> str:
        act = f"_{self.activation}" if self.activation else ""
        return f"batch_norm_2d_training{act}" + ("_channels_last" if self.channels_last else "")

    def moved_bytes(self, shape: tuple[int, ...], dtype: str) -> int:
        """The forward reads x for the statistics, then x again and writes y; the backward reads dy and x to reduce,
        then both again and writes dx: 8 passes."""
        return 8 * math.prod(shape) * DTYPES[activations(dtype)].size

    def bench_calls(self, tensors: dict[str, Any]) -> dict[str, Callable[[], Any]]:
        import torch
        import torch.nn.functional as F

        import rust_kernels.torch  # noqa: F401 (defines torch.ops.rust_kernels)

        layout = torch.channels_last if self.channels_last else torch.contiguous_format
        x, weight, bias, mean, var = (tensors[n] for n in ("x", "weight", "bias", "running_mean", "running_var"))
        x = x.contiguous(memory_format=layout)
        dy = torch.randn_like(x)
        y, dx = torch.empty_like(x), torch.empty_like(x)
        leaves = [t.detach().clone().requires_grad_() for t in (x, weight, bias)]

        act = _torch_activation(self.activation) if self.activation else (lambda t: t)

        def maths(*args: Any) -> Any:
            return act(F.batch_norm(*args))

        def eager_step(fn: Callable[..., Any]) -> Callable[[], Any]:
            def step() -> Any:
                out = fn(leaves[0], mean, var, leaves[1], leaves[2], True, 0.1, EPS)
                return torch.autograd.grad(out, leaves, dy)

            return step

        native = torch.ops.rust_kernels
        ours, ours_op = (self._ours(library, x, dy, weight, bias, mean, var) for library in (ops, native))

        def bound() -> Any:
            torch.neg(x, out=y)
            torch.add(x, dy, out=dx)
            return torch.add(x, dy, out=dx)

        return {
            "ours": ours,
            "ours_op": ours_op,
            "torch": eager_step(maths),
            "compile": eager_step(torch.compile(maths, dynamic=False)),
            "bound": bound,
        }

    def _ours(self, library: Any, x: Any, dy: Any, weight: Any, bias: Any, mean: Any, var: Any) -> Callable[[], Any]:
        """Our forward + backward ops from `library` (rust_kernels.ops, or torch.ops.rust_kernels)."""
        if self.activation is None:

            def plain() -> Any:
                _, save_mean, save_invstd = library.batch_norm_2d_forward(x, weight, bias, mean, var, True, 0.1, EPS)
                return library.batch_norm_2d_backward(dy, x, weight, mean, var, save_mean, save_invstd, True, EPS)

            return plain
        act = self.activation

        def fused() -> Any:
            _, save_mean, save_invstd = library.batch_norm_2d_act_forward(x, weight, bias, mean, var, 0.1, EPS, act)
            return library.batch_norm_2d_act_backward(dy, x, weight, bias, save_mean, save_invstd, EPS, act)

        return fused


class TrainingAddReLU(Training):
    """relu(BatchNorm2d(x) + residual) in training mode, forward + backward (the end of a ResNet block): ours (the
    fused add-and-ReLU ops), PyTorch eager (F.batch_norm, the add, the ReLU and their autograd backward) and
    torch.compile of the same function, against an 11-pass copy."""

    def __init__(self, channels_last: bool) -> None:
        super().__init__(channels_last)

    @property
    def name(self) -> str:
        return "batch_norm_2d_training_add_relu" + ("_channels_last" if self.channels_last else "")

    def moved_bytes(self, shape: tuple[int, ...], dtype: str) -> int:
        """What any two-phase implementation moves: the forward reads x for the statistics, then x and the residual
        and writes y (4 passes); the backward reads dy, y and x to reduce (writing dresidual, the ReLU's gradient, as
        it reads them), then dresidual and x again and writes dx (7). Ours takes 12: its backward writes dresidual in
        a pass of its own (reads dy and y) before the training backward's 5."""
        return 11 * math.prod(shape) * DTYPES[activations(dtype)].size

    def bench_calls(self, tensors: dict[str, Any]) -> dict[str, Callable[[], Any]]:
        import torch
        import torch.nn.functional as F

        import rust_kernels.torch  # noqa: F401 (defines torch.ops.rust_kernels)

        layout = torch.channels_last if self.channels_last else torch.contiguous_format
        x, weight, bias, mean, var = (tensors[n] for n in ("x", "weight", "bias", "running_mean", "running_var"))
        x = x.contiguous(memory_format=layout)
        residual, dy = torch.randn_like(x), torch.randn_like(x)
        y, dx, t = torch.empty_like(x), torch.empty_like(x), torch.empty_like(x)
        leaves = [t.detach().clone().requires_grad_() for t in (x, residual, weight, bias)]

        def maths(x: Any, residual: Any, weight: Any, bias: Any) -> Any:
            return torch.relu(F.batch_norm(x, mean, var, weight, bias, True, 0.1, EPS) + residual)

        def eager_step(fn: Callable[..., Any]) -> Callable[[], Any]:
            def step() -> Any:
                return torch.autograd.grad(fn(*leaves), leaves, dy)

            return step

        def ours_from(library: Any) -> Callable[[], Any]:
            def step() -> Any:
                out, save_mean, save_invstd = library.batch_norm_2d_add_relu_forward(x, residual, weight, bias, mean,
                                                                                     var, 0.1, EPS)  # fmt: skip
                return library.batch_norm_2d_add_relu_backward(dy, out, x, weight, save_mean, save_invstd, EPS)

            return step

        def bound() -> Any:
            torch.neg(x, out=y)
            torch.add(x, residual, out=t)
            torch.add(x, dy, out=dx)
            return torch.add(x, dy, out=dx)

        return {
            "ours": ours_from(ops),
            "ours_op": ours_from(torch.ops.rust_kernels),
            "torch": eager_step(maths),
            "compile": eager_step(torch.compile(maths, dynamic=False)),
            "bound": bound,
        }


class EvalFused(Baseline):
    """The eval forward (frozen statistics) with what follows it fused (inference of a converted model,
    convert(fuse=True)): act(BatchNorm2d(x)) with the ReLU (batch_norm_2d_act_eval_forward; another activation through
    with_activation), or relu(BatchNorm2d(x) + residual) (batch_norm_2d_add_relu_eval_forward), NCHW or
    channels_last: ours, PyTorch eager (F.batch_norm then the activation, or the add and the ReLU) and torch.compile
    of the same maths, against a copy of the fused pass's bytes."""

    suite = "batch_norm_2d"
    bench_shapes = ForwardInference.bench_shapes
    activations = tuple(ACTIVATIONS)

    def __init__(self, channels_last: bool, residual: bool) -> None:
        self.channels_last, self.residual = channels_last, residual
        self.family = "batch_norm_2d_add_relu_eval_forward" if residual else "batch_norm_2d_act_eval_forward"
        self.activation = None if residual else "relu"  # the add + ReLU's is fixed

    @property
    def name(self) -> str:
        act = f"_{self.activation}" if self.activation not in (None, "relu") else ""
        return self.family + act + ("_channels_last" if self.channels_last else "")

    def moved_bytes(self, shape: tuple[int, ...], dtype: str) -> int:
        """Read x (and the residual), write y."""
        return (3 if self.residual else 2) * math.prod(shape) * DTYPES[activations(dtype)].size

    def bench_calls(self, tensors: dict[str, Any]) -> dict[str, Callable[[], Any]]:
        import torch
        import torch.nn.functional as F

        import rust_kernels.torch  # noqa: F401 (defines torch.ops.rust_kernels)

        x, weight, bias, mean, var = (tensors[n] for n in ("x", "weight", "bias", "running_mean", "running_var"))
        x, residual = _in_layout(self.channels_last, x, tensors.get("residual", x))
        y = torch.empty_like(x)

        act = _torch_activation(self.activation or "relu")  # the add + ReLU's: relu(z + residual)

        def maths(x: Any, residual: Any, weight: Any, bias: Any, mean: Any, var: Any) -> Any:
            z = F.batch_norm(x, mean, var, weight, bias, False, 0.0, EPS)
            return act(z + residual if self.residual else z)

        compiled = torch.compile(maths, dynamic=False)
        args = (x, residual, weight, bias, mean, var)
        op, torch_op = getattr(ops, self.family), getattr(torch.ops.rust_kernels, self.family)
        call = (*args, EPS) if self.residual else (x, *args[2:], EPS, self.activation)
        ours = {"ours": lambda: op(*call), "ours_op": lambda: torch_op(*call)}

        def bound() -> Any:
            return torch.add(x, residual, out=y) if self.residual else torch.neg(x, out=y)

        return {**ours, "torch": lambda: maths(*args), "compile": lambda: compiled(*args), "bound": bound}


class EvalFusedBackward(EvalFused):
    """The backward of EvalFused's forward (fine-tuning with frozen BN, convert(fuse=True)): the act backward
    (batch_norm_2d_act_eval_backward, ReLU) or the add + ReLU backward (batch_norm_2d_add_relu_eval_backward): ours,
    PyTorch eager (autograd through F.batch_norm in eval mode then the ReLU, or the add and the ReLU) and
    torch.compile of the same maths (its backward), against a copy of the bytes any implementation moves."""

    bench_shapes = Backward.bench_shapes

    def __init__(self, channels_last: bool, residual: bool) -> None:
        super().__init__(channels_last, residual)
        self.family = self.family.replace("_forward", "_backward")

    def moved_bytes(self, shape: tuple[int, ...], dtype: str) -> int:
        """The act backward: read dy and x, write dx. The add + ReLU backward: read dy, y and x, write dresidual and
        dx (ours takes 6 passes: the mask's pass writes dresidual, then the eval backward reads it)."""
        return (5 if self.residual else 3) * math.prod(shape) * DTYPES[activations(dtype)].size

    def bench_calls(self, tensors: dict[str, Any]) -> dict[str, Callable[[], Any]]:
        import torch
        import torch.nn.functional as F

        import rust_kernels.torch  # noqa: F401 (defines torch.ops.rust_kernels)

        dy, x, weight, mean, var = (tensors[n] for n in ("dy", "x", "weight", "running_mean", "running_var"))
        bias = tensors.get("bias", torch.zeros_like(weight))  # the add + ReLU backward takes none
        dy, x, y = _in_layout(self.channels_last, dy, x, tensors.get("y", x))
        dx, t = torch.empty_like(x), torch.empty_like(x)
        leaves = [a.detach().clone().requires_grad_() for a in (x, y, weight, bias)]  # y: the residual's stand-in

        act = _torch_activation(self.activation or "relu")  # the add + ReLU's: relu(z + residual)

        def maths(x: Any, residual: Any, weight: Any, bias: Any) -> Any:
            z = F.batch_norm(x, mean, var, weight, bias, False, 0.0, EPS)
            return act(z + residual if self.residual else z)

        def eager_step(fn: Callable[..., Any]) -> Callable[[], Any]:
            wrt = leaves if self.residual else [leaves[0], *leaves[2:]]

            def step() -> Any:
                return torch.autograd.grad(fn(*leaves), wrt, dy)

            return step

        op, torch_op = getattr(ops, self.family), getattr(torch.ops.rust_kernels, self.family)
        call = (dy, y, x, weight, mean, var, EPS) if self.residual else (dy, x, weight, bias, mean, var, EPS,
                                                                          self.activation)  # fmt: skip

        def bound() -> Any:
            if self.residual:
                torch.neg(x, out=t)
            return torch.add(x, dy, out=dx)

        return {
            "ours": lambda: op(*call),
            "ours_op": lambda: torch_op(*call),
            "torch": eager_step(maths),
            "compile": eager_step(torch.compile(maths, dynamic=False)),
            "bound": bound,
        }


register(Backward())
register(ForwardInference())
register(Backward(channels_last=True))
register(ForwardInference(channels_last=True))
register(Training(channels_last=False))
register(Training(channels_last=True))
register(Training(channels_last=False, activation="relu"))
register(Training(channels_last=True, activation="relu"))
register(TrainingAddReLU(channels_last=False))
register(TrainingAddReLU(channels_last=True))
for _layout in (False, True):
    register(EvalFused(channels_last=_layout, residual=False))
    register(EvalFused(channels_last=_layout, residual=True))
    register(EvalFusedBackward(channels_last=_layout, residual=False))
    register(EvalFusedBackward(channels_last=_layout, residual=True))
