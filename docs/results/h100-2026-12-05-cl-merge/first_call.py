"""Where the first training BatchNorm2d step's seconds go on a GPU (12-05 probes: the first backward 2.1-3.8 s, torch's
0.03-0.25 s): cProfile of a channels_last f32 forward + backward, then a second shape's in the same process.

    RUST_KERNELS_TUNING=off python first_call.py
"""

import cProfile
import pstats
import time

import torch

from rust_kernels.torch import BatchNorm2d


def step(shape: tuple[int, int, int, int]) -> None:
    x = torch.randn(shape, device="cuda").contiguous(memory_format=torch.channels_last).requires_grad_()
    module = BatchNorm2d(shape[1]).cuda()
    t = time.perf_counter()
    module(x).sum().backward()
    torch.cuda.synchronize()
    print(f"{shape}: forward + backward {1e3 * (time.perf_counter() - t):.1f} ms", flush=True)


torch.zeros(1, device="cuda").sum().item()  # CUDA's own start-up outside the profile
profile = cProfile.Profile()
profile.enable()
step((32, 256, 28, 28))
profile.disable()
step((32, 128, 56, 56))
step((32, 256, 28, 28))
pstats.Stats(profile).sort_stats("cumulative").print_stats(30)
