"""ResNet-50 training step (B=128, bf16 autocast, channels_last, BN training, convert(fuse=True)) with the training
reductions' MAX_SPLIT set to argv[1] (the shipped 256, or more: more CTAs for the channels_last reductions of few
channel blocks), tuning on: step time against torch's BN in the same process (CUDA events, median of 5 rounds of
10 steps) and our BN kernels' GPU time per step (torch.profiler, 3 steps)."""

import copy
import statistics
import sys

import torch
import torchvision
from torch.profiler import ProfilerActivity, profile

import rust_kernels.torch as rk
from rust_kernels.families.batch_norm import training

training.MAX_SPLIT = int(sys.argv[1])
torch.manual_seed(0)
base = torchvision.models.resnet50().cuda().to(memory_format=torch.channels_last).train()
x = torch.randn(128, 3, 224, 224, device="cuda").contiguous(memory_format=torch.channels_last)
y = torch.randint(0, 1000, (128,), device="cuda")
steps = {}
for name, model in (("torch", copy.deepcopy(base)), ("ours", rk.convert(copy.deepcopy(base), fuse=True))):
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step(model: torch.nn.Module = model, opt: torch.optim.Optimizer = opt) -> None:
        with torch.autocast("cuda", torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    steps[name] = step
    for _ in range(5):
        step()
torch.cuda.synchronize()
times: dict[str, list[float]] = {"torch": [], "ours": []}
for _ in range(5):
    for name, step in steps.items():
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(10):
            step()
        end.record()
        torch.cuda.synchronize()
        times[name].append(start.elapsed_time(end) / 10)
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    for _ in range(3):
        steps["ours"]()
    torch.cuda.synchronize()
ours_bn = sum(e.self_device_time_total for e in prof.key_averages() if e.key.endswith("_entry_point")) / 3e3
t, o = statistics.median(times["torch"]), statistics.median(times["ours"])
print(
    f"MAX_SPLIT {training.MAX_SPLIT}: torch {t:.2f} ms, ours {o:.2f} ms a step ({t / o:.3f}x); "
    f"our BN kernels {ours_bn:.2f} ms of GPU time a step"
)
