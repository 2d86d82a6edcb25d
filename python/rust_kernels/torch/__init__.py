"""rust_kernels in PyTorch programs (needs torch; `import rust_kernels` alone never imports it).

    import rust_kernels.torch as rk_torch

    model = rk_torch.convert(model)      # every nn.BatchNorm2d becomes rk_torch.BatchNorm2d, in place
                                         # (nn.SyncBatchNorm: rk_torch.SyncBatchNorm)
    model.train()                        # training mode: batch statistics on ours, NCHW or channels_last
    model.eval()                         # eval mode: the running statistics, on ours too, NCHW or channels_last
    model = rk_torch.convert(model, fuse=True)  # BN + ReLU/SiLU/ReLU6/Hardswish, BN + add + ReLU fused, both modes
    y, save_mean, save_invstd = torch.ops.rust_kernels.batch_norm_2d_forward(x, weight, bias, mean, var, True)
    dx, dweight, dbias = torch.ops.rust_kernels.batch_norm_2d_backward(dy, x, weight, mean, var, save_mean,
                                                                       save_invstd, True)

The operators (torch.library custom ops, generated from the ops' declarations: rust_kernels.torch.library) run our
CUDA kernels on CUDA tensors, on torch's current stream without synchronising (CUDA graphs capture them), and the
host emulator on CPU tensors. They have fake kernels (torch.compile with fullgraph=True, export, meta tensors) and
autograd (the forward mutates the running statistics in training mode, as torch's native batch norm does).
A user's op declared with torch=True becomes torch.ops.rust_kernels.<name> at import, or with `define(op)` after it
(examples/torch_op/).
"""

from rust_kernels.torch.library import OPS, define
from rust_kernels.torch.modules import (
    BatchNorm2d,
    FusedBatchNorm2d,
    FusedBatchNorm2dAddReLU,
    SyncBatchNorm,
    batch_norm_2d,
    batch_norm_act_2d,
    batch_norm_add_relu_2d,
    convert,
)

__all__ = ["OPS", "BatchNorm2d", "FusedBatchNorm2d", "FusedBatchNorm2dAddReLU", "SyncBatchNorm", "batch_norm_2d",
           "batch_norm_act_2d", "batch_norm_add_relu_2d", "convert", "define"]  # fmt: skip
