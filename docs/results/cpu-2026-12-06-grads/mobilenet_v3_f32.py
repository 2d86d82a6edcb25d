"""torchvision's MobileNetV3-Large, one f32 training step's gradients (BN training, NCHW, `convert(fuse=True)`, our
kernels in the host emulator) against the same step in float64, beside torch's f32 gradients: the CPU form of
`scripts/model_grads_vs_float64.py mobilenet_v3_large train contiguous fuse`, which on an H100 (12-06) found ours
erring more than twice torch's on 24 of 174 parameters in one run and on none in another. Dropout drops nothing.
Prints each side's worst error, the parameters where ours errs more than twice torch's (and how many the other
way), and per side the activation inputs (of the BN + ReLU and BN + Hardswish layers) that fell on the other side of
a kink than float64's: a flipped element changes its layer's dx by about 1 / sqrt(elements) of its norm, and every
gradient upstream with it.

    PYTHONPATH=python:TORCHVISION python mobilenet_v3_f32.py [BATCH IMAGE SEED]   # torchvision needed; SEED
                                                                                  # draws the step's x and labels
"""

import copy
import sys

import torch
import torchvision

import rust_kernels.torch as rk
from rust_kernels.bench import models

batch, image, seed = (int(a) for a in sys.argv[1:4]) if len(sys.argv) > 3 else (8, 224, 0)
torch.manual_seed(0)
base = torchvision.models.get_model("mobilenet_v3_large", weights=None).train()
for m in base.modules():
    if isinstance(m, torch.nn.Dropout):
        m.p = 0.0
with torch.no_grad():  # running statistics of the data, as the GPU script's three batches give
    for _ in range(3):
        base(torch.randn(batch, 3, image, image))
exact, theirs = copy.deepcopy(base).double(), copy.deepcopy(base)
ours = rk.convert(copy.deepcopy(base), fuse=True)
torch.manual_seed(seed + 1)
x = torch.randn(batch, 3, image, image)
t = torch.randint(0, 1000, (batch,))


def region(out: torch.Tensor, act: str) -> torch.Tensor:
    """Each element's side of the activation's kinks, read from its output: ReLU 0 (z <= 0) or 1; Hardswish 0
    (z <= -3, or z = 0), 2 (z > 3) or 1."""
    if act == "ReLU":
        return (out > 0).to(torch.int8)
    return torch.where(out == 0, 0, torch.where(out > 3, 2, 1)).to(torch.int8)


# The BN + activation layers: their activation's module (its output read) in torch's model and float64's, and the
# BN module in ours (convert(fuse=True) fuses the activation into it).
LAYERS = {n: type(m[-1]).__name__ for n, m in base.named_modules()
          if type(m).__name__ == "Conv2dNormActivation" and type(m[-1]).__name__ in ("ReLU", "Hardswish")}  # fmt: skip


def step(model, x, last):
    """The parameters' gradients, and each BN + activation layer's output by layer name (`last`: the activation's
    module is the layer's last, else its BN)."""
    outputs, named = {}, dict(model.named_modules())

    def keep(name):
        return lambda m, i, o: outputs.__setitem__(name, o.detach())

    hooks = [named[f"{n}.{2 if last else 1}"].register_forward_hook(keep(n)) for n in LAYERS]
    model.zero_grad(set_to_none=True)
    torch.nn.functional.cross_entropy(model(x), t).backward()
    for h in hooks:
        h.remove()
    return models.named_grads(model), outputs


(g64, r64), (gt, rt), (go, ro) = step(exact, x.double(), True), step(theirs, x, True), step(ours, x, False)
check = models.check_grads(g64, gt, go)
print(f"B={batch} {image}x{image} seed {seed}: vs float64, torch max {check.torch_worst:.2e}, ours max "
      f"{check.worst:.2e} ({check.worst_param}: torch {check.torch[check.worst_param]:.2e}); {check.vanishing} "
      "vanishing")  # fmt: skip
worse = [n for n in check.ours if check.ours[n] > 2 * check.torch[n] + 1e-12]
better = [n for n in check.ours if check.torch[n] > 2 * check.ours[n] + 1e-12]
print(f"params where ours errs more than 2x torch: {len(worse)} of {len(check.ours)}; torch more than 2x ours: "
      f"{len(better)}")  # fmt: skip
for n in worse[:30]:
    print(f"  {n}: torch {check.torch[n]:.2e}, ours {check.ours[n]:.2e}")
for side, regions in (("torch", rt), ("ours", ro)):
    flips = {}
    for n, act in LAYERS.items():
        count = int((region(r64[n], act) != region(regions[n], act)).sum())
        if count:
            flips[n] = count
    print(
        f"{side}: {sum(flips.values())} activation inputs on the other side of a kink than float64's, in "
        f"{len(flips)} layers: {flips}"
    )
