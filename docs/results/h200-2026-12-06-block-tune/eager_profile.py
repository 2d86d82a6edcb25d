"""Where an eager ResNet-50 training step with our BN (B = 32, f32, BN training, convert(fuse=True)) spends its host
time: cProfile over 3 steps after 5 (the bench's eager cells ran at 0.2x torch here).

    RUST_KERNELS_CACHE_DIR=... PYTHONPATH=python python eager_profile.py
"""

import cProfile
import pstats
import time

import torch
import torchvision

import rust_kernels.torch as rk

model = rk.convert(torchvision.models.resnet50().cuda().train(), fuse=True)
opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
x, y = torch.randn(32, 3, 224, 224, device="cuda"), torch.randint(0, 1000, (32,), device="cuda")


def step():
    opt.zero_grad(set_to_none=True)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()


for i in range(5):
    t = time.perf_counter()
    step()
    torch.cuda.synchronize()
    print(f"warm-up step {i}: {1e3 * (time.perf_counter() - t):.1f} ms", flush=True)
profile = cProfile.Profile()
profile.enable()
for _ in range(3):
    step()
torch.cuda.synchronize()
profile.disable()
pstats.Stats(profile).sort_stats("cumulative").print_stats(30)
