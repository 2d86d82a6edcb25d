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
from rust_kernels.bench import models

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


def worse(eo: dict, et: dict) -> list[str]:
    """The parameters where ours errs more than twice torch's error."""
    return [n for n in eo if eo[n] > 2 * et[n] + 1e-12]


g64 = grads(ref, "f64", x.double())
# A parameter whose float64 gradient is at float64's rounding level has none in exact arithmetic (a BN bias feeding a
# training-mode BN through linear layers alone: MobileNet and EfficientNet projection BNs); grad_errors compares it
# with the model's gradient norm (the bench's check, rust_kernels.bench.models).
print(
    f"{len(models.vanishing(g64))} of {len(g64)} parameters have no gradient in exact arithmetic (compared to "
    "||all|| instead)"
)
for dtype in ("f32", "bf16"):
    check = models.check_grads(g64, grads(model, dtype, x), grads(ours, dtype, x))
    et, eo, w = check.torch, check.ours, check.worst_param
    bad = worse(eo, et)
    print(
        f"{name} {bn} {dtype}: vs float64: torch max {check.torch_worst:.2e}, ours max {check.worst:.2e} ({w}: "
        f"torch {et[w]:.2e}); params where ours errs more than 2x torch: {len(bad)} of {len(g64)} {bad[:4]}"
    )
