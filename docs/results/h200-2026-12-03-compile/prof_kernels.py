"""GPU time by kernel of a compiled ResNet-50 training step (B=128, bf16 autocast, BN training): torch's BN vs ours
(convert(fuse=True)), one process; torch.profiler over 3 steps after warm-up."""
import copy
import sys

import torch
import torchvision
from torch.profiler import ProfilerActivity, profile

import rust_kernels.torch as rk

fmt = torch.channels_last if sys.argv[1] == "cl" else torch.contiguous_format
torch.manual_seed(0)
base = torchvision.models.resnet50().cuda().to(memory_format=fmt).train()
x = torch.randn(128, 3, 224, 224, device="cuda").contiguous(memory_format=fmt)
y = torch.randint(0, 1000, (128,), device="cuda")
for name, model in (("torch", copy.deepcopy(base)), ("ours", rk.convert(copy.deepcopy(base), fuse=True))):
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    cmodel = torch.compile(model)
    def step():
        with torch.autocast("cuda", torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(cmodel(x), y)  # noqa: B023 (called in this iteration)
        loss.backward()
        opt.step()  # noqa: B023 (called in this iteration)
        opt.zero_grad(set_to_none=True)  # noqa: B023 (called in this iteration)
    for _ in range(6):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            step()
        torch.cuda.synchronize()
    events = [e for e in prof.key_averages() if e.device_time_total > 0]
    total = sum(e.self_device_time_total for e in events) / 3e3
    print(f"== {name} {sys.argv[1]}: GPU time per step {total:.2f} ms")
    for e in sorted(events, key=lambda e: -e.self_device_time_total)[:22]:
        print(f"{e.self_device_time_total / 3e3:8.3f} ms {e.count // 3:5d}x  {e.key[:110]}")
