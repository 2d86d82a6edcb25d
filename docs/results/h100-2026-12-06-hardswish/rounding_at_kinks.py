"""Why the first GPU run's f16 Hardswish test failed, in the emulator (the same kernels' arithmetic): the test drew
float64 inputs, rounded them to f16 for the kernels, and compared with float64 torch on the unrounded ones. Rounding x
to f16 moves some z across a kink (ReLU's 0, Hardswish's -3 and 3), where the gradient jumps, so dx differs at those
elements by a jump times dy whatever the kernel. Against float64 on the rounded inputs, ours is within f16's
rounding of dx. (The test now draws its inputs rounded: test_residual.rounded_inputs.)

    PYTHONPATH=python python rounding_at_kinks.py
"""

import numpy as np
import torch

from rust_kernels import ops

torch.manual_seed(0)
shape = (8, 24, 14, 14)  # the test's inputs, as it drew them before
x64, dy64 = torch.randn(shape, dtype=torch.float64) * 3 + 2, torch.randn(shape, dtype=torch.float64)
w64, b64 = torch.rand(24, dtype=torch.float64) + 0.5, torch.randn(24, dtype=torch.float64)
ACT = {"hardswish": torch.nn.functional.hardswish, "relu": torch.relu}


def dx_float64(x, dy, act):
    leaves = [t.clone().requires_grad_() for t in (x, w64, b64)]
    y = ACT[act](torch.nn.functional.batch_norm(leaves[0], None, None, leaves[1], leaves[2], True, 0.1, 1e-5))
    return torch.autograd.grad(y, leaves[0], dy)[0]


for act in ACT:
    want = dx_float64(x64, dy64, act)
    want_rounded = dx_float64(x64.half().double(), dy64.half().double(), act)
    x, dy = x64.numpy().astype(np.float16), dy64.numpy().astype(np.float16)
    w, b = w64.numpy().astype(np.float32), b64.numpy().astype(np.float32)
    m, v = np.zeros(24, np.float32), np.ones(24, np.float32)
    _, save_mean, save_invstd = ops.batch_norm_2d_act_forward(x, w, b, m, v, 0.1, 1e-5, act, backend="host")
    dx = ops.batch_norm_2d_act_backward(dy, x, w, b, save_mean, save_invstd, 1e-5, act, backend="host")[0]
    dx = torch.from_numpy(np.asarray(dx, np.float64))
    scale = want.abs().max()
    print(f"{act}: max |dx error| / max |dx|, f16 ours against float64 of the unrounded inputs "
          f"{float((dx - want).abs().max() / scale):.2e}, of the rounded inputs "
          f"{float((dx - want_rounded).abs().max() / scale):.2e}; float64 of the rounded against the unrounded "
          f"{float((want_rounded - want).abs().max() / scale):.2e}")  # fmt: skip
