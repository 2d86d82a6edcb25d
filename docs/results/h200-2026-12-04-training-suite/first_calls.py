"""Host time of an op call's first use of a key the shipped table serves (the tuner names every candidate's entry,
finds them all, and launches the winner; no timing), against a later call: training-mode forward + backward on the
suite's first shapes in spread order, NCHW and channels_last, bf16 with f32 parameters, wall time with the GPU
synchronised around each call."""

import statistics
import sys
import time

import torch

from rust_kernels import ops, tuning
from rust_kernels.bench import suite

EPS = 1e-5
every = suite.shapes("batch_norm_2d")
shapes = [every[i] for i in suite.spread(len(every))[: int(sys.argv[1])] if every[i][0] * every[i][2] * every[i][3] > 1]
first, later = [], []
for shape in shapes:
    for layout in (torch.contiguous_format, torch.channels_last):
        x = torch.randn(shape, device="cuda").to(torch.bfloat16).contiguous(memory_format=layout)
        dy = torch.randn_like(x)
        weight, bias = torch.ones(shape[1], device="cuda"), torch.zeros(shape[1], device="cuda")
        mean, var = torch.zeros(shape[1], device="cuda"), torch.ones(shape[1], device="cuda")

        def step(x=x, dy=dy, weight=weight, bias=bias, mean=mean, var=var):
            _, sm, si = ops.batch_norm_2d_forward(x, weight, bias, mean, var, True, 0.1, EPS)
            ops.batch_norm_2d_backward(dy, x, weight, mean, var, sm, si, True, EPS)

        for times in (first, later):
            torch.cuda.synchronize()
            start = time.perf_counter()
            step()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - start) * 1e3)
print(
    f"{len(first)} keys pairs (forward + backward): first call median {statistics.median(first):.1f} ms "
    f"(mean {statistics.mean(first):.1f}), later call median {statistics.median(later):.2f} ms; "
    f"{len(tuning.timed)} keys timed (0: the table served them all)"
)
