"""One training step of a torchvision model with BatchNorm frozen (fine-tuning) or training, converted
(rust_kernels.torch.convert) and not, in f32 and under bf16 autocast, contiguous or channels_last, each set of
gradients compared with the same model's in float64: is a difference between ours and torch's a rounding difference
(both as far from float64) or an error? GPU machine:
    PYTHONPATH=python python3 scripts/model_grads_vs_float64.py resnet50 [frozen|train] [contiguous|channels_last]
        [fuse]   # rust_kernels.torch.convert(model, fuse=True): each BN feeding only a ReLU, SiLU, ReLU6 or
                 # Hardswish fused
Dropout and stochastic depth (MobileNets, EfficientNets) are set to drop nothing: their masks would differ from side
to side (and float64 draws its own), so the gradients would differ by what was dropped, not by rounding.
"""

import copy
import sys

import torch
import torchvision

import rust_kernels.torch as rkt

torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
torch.manual_seed(0)
name = sys.argv[1]
bn = sys.argv[2] if len(sys.argv) > 2 else "frozen"
layout = torch.channels_last if len(sys.argv) > 3 and sys.argv[3] == "channels_last" else torch.contiguous_format
model = getattr(torchvision.models, name)(weights=None).cuda().train()
for m in model.modules():
    if isinstance(m, torch.nn.Dropout | torchvision.ops.StochasticDepth):
        m.p = 0.0
with torch.no_grad():
    for _ in range(3):
        model(torch.randn(16, 3, 224, 224, device="cuda"))
if bn == "frozen":
    model.eval()
model = model.to(memory_format=layout)
ref = copy.deepcopy(model).double()
ours = rkt.convert(copy.deepcopy(model), fuse=len(sys.argv) > 4 and sys.argv[4] == "fuse")
x = torch.randn(8, 3, 224, 224, device="cuda").contiguous(memory_format=layout)
t = torch.randint(0, 1000, (8,), device="cuda")


def grads(m, dtype, x):
    m.zero_grad(set_to_none=True)
    with torch.autocast("cuda", torch.bfloat16, enabled=dtype == "bf16"):
        loss = torch.nn.functional.cross_entropy(m(x).double(), t)
    loss.backward()
    return {n: p.grad.double() for n, p in m.named_parameters()}


def relative(got: dict, want: dict, scale: dict) -> dict:
    """Per parameter: ||got - want|| / scale."""
    return {n: float((got[n] - want[n]).norm() / scale[n]) for n in want}


g64 = grads(ref, "f64", x.double())
# A parameter whose float64 gradient is at float64's rounding level has none in exact arithmetic (a BN bias feeding a
# training-mode BN through linear layers alone: MobileNet and EfficientNet projection BNs). Relative to its own norm,
# any low-precision gradient of it is noise against noise, so it is compared relative to the model's gradient norm.
total = float(torch.cat([g.flatten() for g in g64.values()]).norm())
vanishing = {n for n, g in g64.items() if float(g.norm()) <= 1e-10 * total}
scale = {n: total if n in vanishing else float(g.norm()) for n, g in g64.items()}
print(f"{len(vanishing)} of {len(g64)} parameters have no gradient in exact arithmetic (compared to ||all|| instead)")
for dtype in ("f32", "bf16"):
    gt, go = grads(model, dtype, x), grads(ours, dtype, x)
    et, eo = relative(gt, g64, scale), relative(go, g64, scale)
    diff = relative(go, gt, scale)
    w = max(diff, key=diff.get)
    worse = [n for n in g64 if eo[n] > 2 * et[n] + 1e-12]
    print(
        f"{name} {bn} {dtype}: max rel diff ours vs torch {diff[w]:.2e} ({w}); vs float64: torch max "
        f"{max(et.values()):.2e}, ours max {max(eo.values()):.2e}; at {w}: torch {et[w]:.2e}, ours {eo[w]:.2e}; "
        f"params where ours errs more than 2x torch: {len(worse)} of {len(g64)} {worse[:4]}"
    )
