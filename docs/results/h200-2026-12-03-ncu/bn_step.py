"""One ResNet-50 training step (B=128, bf16 autocast, BN training), with torch's BatchNorm2d or ours
(convert(fuse=True)), inside cudaProfilerStart/Stop after warm-up: run under `ncu --profile-from-start off` to
profile that side's BN kernels (summarise.py reads the CSV).

    python bn_step.py cl|nchw torch|ours"""

import copy
import sys

import torch
import torchvision

import rust_kernels.torch as rk

fmt = torch.channels_last if sys.argv[1] == "cl" else torch.contiguous_format
torch.manual_seed(0)
base = torchvision.models.resnet50().cuda().to(memory_format=fmt).train()
x = torch.randn(128, 3, 224, 224, device="cuda").contiguous(memory_format=fmt)
y = torch.randint(0, 1000, (128,), device="cuda")
for model in [copy.deepcopy(base) if sys.argv[2] == "torch" else rk.convert(copy.deepcopy(base), fuse=True)]:
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step(model: torch.nn.Module = model, opt: torch.optim.Optimizer = opt) -> None:
        with torch.autocast("cuda", torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(4):
        step()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    step()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
