"""Where a ResNet-50 training step's host time goes (torchvision, B = 64, bf16 autocast, channels_last, SGD), torch's
BatchNorm2d against convert(model, fuse=True): host ms to issue a step (the GPU synchronised after), then cProfile of
ours over 10 steps, the top functions by own time.

    python host_profile.py
"""

import copy
import cProfile
import pstats
import time
from collections.abc import Callable

import torch
import torchvision

from rust_kernels.torch import convert

torch.manual_seed(0)
base = torchvision.models.resnet50().cuda().to(memory_format=torch.channels_last)
x = torch.randn(64, 3, 224, 224, device="cuda").contiguous(memory_format=torch.channels_last)
labels = torch.randint(0, 1000, (64,), device="cuda")


def stepper(model: torch.nn.Module) -> Callable[[], None]:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), labels)
        loss.backward()
        optimizer.step()

    return step


def host_ms(step: Callable[[], None], steps: int = 10) -> float:
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        step()
        times.append(1e3 * (time.perf_counter() - t))
        torch.cuda.synchronize()
    return sorted(times)[steps // 2]


theirs, ours = stepper(copy.deepcopy(base)), stepper(convert(copy.deepcopy(base), fuse=True))
for name, step in (("torch", theirs), ("ours", ours), ("torch", theirs), ("ours", ours)):
    print(f"{name}: host {host_ms(step):.2f} ms to issue a step (median of 10)", flush=True)
profile = cProfile.Profile()
profile.enable()
for _ in range(10):
    ours()
torch.cuda.synchronize()
profile.disable()
stats = pstats.Stats(profile)
stats.sort_stats("tottime").print_stats(35)
stats.sort_stats("cumulative").print_stats("rust_kernels", 30)
