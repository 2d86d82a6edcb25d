"""torchvision's MobileNetV3-Large in float64 on the CPU (our kernels in the host emulator), training mode, one
forward and backward: torch's model against `convert(fuse=True)` of a copy, the same dropout mask on both sides.
Prints what was fused and the largest differences of y, dx and the parameters' gradients.

    PYTHONPATH=python python cpu_mobilenet_v3.py   # torchvision needed (not a CI dependency)
"""

import collections
import copy

import torch
import torchvision

import rust_kernels.torch as rk

torch.manual_seed(0)
model = torchvision.models.get_model("mobilenet_v3_large", weights=None, num_classes=10).double().train()
ours = rk.convert(copy.deepcopy(model), fuse=True)
kinds = collections.Counter((type(m).__name__, getattr(m, "activation", None)) for m in ours.modules()
                            if isinstance(m, torch.nn.BatchNorm2d))  # fmt: skip
print("batch norms:", dict(kinds))
x = torch.randn(2, 3, 64, 64, dtype=torch.float64)
a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
torch.manual_seed(1)
ya = model(a)
torch.manual_seed(1)
yb = ours(b)
ya.sum().backward()
yb.sum().backward()
print(f"max |y diff| {(ya - yb).abs().max():.2e}, max |dx diff| {(a.grad - b.grad).abs().max():.2e}")
worst = max(((p.grad - q.grad).abs().max().item(), n) for (n, p), q in zip(model.named_parameters(),
                                                                           ours.parameters(), strict=True))  # fmt: skip
print(f"max |gradient diff| {worst[0]:.2e} ({worst[1]})")
