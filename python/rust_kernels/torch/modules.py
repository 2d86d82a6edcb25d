"""`BatchNorm2d`, torch.nn.BatchNorm2d on rust_kernels' kernels where they exist, and `convert(model)`."""

from __future__ import annotations

import torch

from rust_kernels.torch.batch_norm import batch_norm_2d


class BatchNorm2d(torch.nn.BatchNorm2d):
    """torch.nn.BatchNorm2d (same constructor, parameters, buffers and state_dict) that normalises with the running
    statistics (eval mode with track_running_stats) with our forward kernel, and our backward kernel under autograd
    (rust_kernels.torch.batch_norm_2d: directly when eager, through torch.ops.rust_kernels when compiled or traced).
    Training mode, and eval mode without running statistics, normalise with batch statistics: torch's own
    implementation runs them until rust_kernels' training-mode kernels land.

    NCHW inputs in f32, f64, bf16 or f16, with the parameters in the same dtype or, for bf16/f16 inputs, in f32 (as
    torch.autocast leaves them). A channels_last input is copied to contiguous NCHW first (see
    rust_kernels.torch.library); the output is contiguous NCHW."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if self.training or self.running_mean is None or self.running_var is None:
            return super().forward(input)
        self._check_input_dim(input)
        return batch_norm_2d(input, self.running_mean, self.running_var, self.weight, self.bias, self.eps)


def convert(model: torch.nn.Module) -> torch.nn.Module:
    """Makes every torch.nn.BatchNorm2d in `model` (the model itself included) a rust_kernels BatchNorm2d, in place,
    and returns `model`. The modules stay the same objects, only their class changes (as torch's lazy modules do),
    so parameters (the optimizer's references too), buffers, device, dtype, requires_grad, hooks and train/eval
    state are kept. Subclasses of torch.nn.BatchNorm2d are left alone: their forward may differ."""
    for module in model.modules():
        if type(module) is torch.nn.BatchNorm2d:
            module.__class__ = BatchNorm2d
    return model
