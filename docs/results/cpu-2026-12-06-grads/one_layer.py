"""One BN + ReLU layer of MobileNetV3-Large (default features.4.block.0, where mobilenet_v3_f32.py's seed 0 found
ours' gradients 200x torch's error) on its float64 inputs from the same step (x into the BN, dy out of the ReLU),
run alone in f32: torch's and ours' (host emulator) y, dx, dweight and dbias against float64. With the layer's
inputs exact, does either side's arithmetic err more? And how close to ReLU's kink its nearest input lies.

    PYTHONPATH=python:TORCHVISION python one_layer.py [LAYER [SEED]]
"""

import copy
import sys

import torch
import torchvision

import rust_kernels.torch as rk

name = sys.argv[1] if len(sys.argv) > 1 else "features.4.block.0"
seed = int(sys.argv[2]) if len(sys.argv) > 2 else 0
torch.manual_seed(0)
base = torchvision.models.get_model("mobilenet_v3_large", weights=None).train()
for m in base.modules():
    if isinstance(m, torch.nn.Dropout):
        m.p = 0.0
    if hasattr(m, "inplace"):
        m.inplace = False  # a backward hook's output may not be modified in place
with torch.no_grad():  # as mobilenet_v3_f32.py
    for _ in range(3):
        base(torch.randn(8, 3, 224, 224))
exact = copy.deepcopy(base).double()
torch.manual_seed(seed + 1)
x = torch.randn(8, 3, 224, 224)
t = torch.randint(0, 1000, (8,))
layer = dict(exact.named_modules())[name]
seen = {}
layer[1].register_forward_hook(lambda m, i, o: seen.__setitem__("x", i[0].detach()))
layer[2].register_full_backward_hook(lambda m, gi, go: seen.__setitem__("dy", go[0].detach()))
torch.nn.functional.cross_entropy(exact(x.double()), t).backward()
bn = layer[1]
weight, bias = bn.weight.detach().clone(), bn.bias.detach().clone()


def run(dtype, ours):
    xx, w, b = (v.to(dtype).clone().requires_grad_() for v in (seen["x"], weight, bias))
    mean, var = torch.zeros(w.shape, dtype=dtype), torch.ones(w.shape, dtype=dtype)
    if ours:
        y = rk.batch_norm_act_2d(xx, mean, var, w, b, momentum=0.1, eps=bn.eps, act="relu", training=True)
    else:
        y = torch.relu(torch.nn.functional.batch_norm(xx, mean, var, w, b, True, 0.1, bn.eps))
    y.backward(seen["dy"].to(dtype))
    return [v.detach().double() for v in (y, xx.grad, w.grad, b.grad)]


want = run(torch.float64, False)
print(f"{name} {tuple(seen['x'].shape)}, seed {seed}: relative error against float64 (y, dx, dweight, dbias)")
for label, dtype, ours in (("torch f32", torch.float32, False), ("ours f32", torch.float32, True)):
    errors = [float((a - r).norm() / r.norm()) for a, r in zip(run(dtype, ours), want, strict=True)]
    print(f"  {label}: " + " ".join(f"{e:.2e}" for e in errors))
x64 = seen["x"]
mean, var = x64.mean((0, 2, 3), keepdim=True), x64.var((0, 2, 3), unbiased=False, keepdim=True)
z = (x64 - mean) / torch.sqrt(var + bn.eps) * weight.double()[None, :, None, None] + bias.double()[None, :, None, None]
print(f"  nearest input to the kink: |z| = {float(z.abs().min()):.2e}; |z| < 1e-6: {int((z.abs() < 1e-6).sum())} of "
      f"{z.numel()}")  # fmt: skip
