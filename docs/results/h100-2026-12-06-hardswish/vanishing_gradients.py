"""EfficientNet-B0's projection BN biases have no gradient in exact arithmetic: each BN's output reaches the next
training-mode BN through a 1x1 convolution (and the residual add) alone, so a per-channel shift is subtracted again
with that BN's batch mean. torch alone, float64, on the CPU, dropout and stochastic depth dropping nothing.

    python vanishing_gradients.py   # torchvision needed
"""

import torch
import torchvision

torch.manual_seed(0)
model = torchvision.models.efficientnet_b0(weights=None).double().train()
for m in model.modules():
    if isinstance(m, torch.nn.Dropout | torchvision.ops.StochasticDepth):
        m.p = 0.0
x = torch.randn(4, 3, 64, 64, dtype=torch.float64)
torch.nn.functional.cross_entropy(model(x), torch.randint(0, 1000, (4,))).backward()
grads = dict(model.named_parameters())
for name in ("features.6.0.block.3.1.bias", "features.6.0.block.3.1.weight", "features.5.0.block.3.1.bias",
             "features.6.1.block.3.1.bias"):  # fmt: skip
    print(f"||grad {name}|| = {float(grads[name].grad.norm()):.2e}")
