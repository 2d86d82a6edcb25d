"""Runs one training-mode forward + backward in channels_last per argument "BxCxHxW:dtype", with the plans the
runtime chooses (the shipped tuning table), between cudaProfilerStart/Stop (for `ncu --profile-from-start off`):
two warm-up pairs outside the range, one inside. Without ncu it prints each pair's GPU time (CUDA events, median
of 50), to set beside the sum of its kernels' durations under ncu."""

import sys
from collections.abc import Callable

import torch

from rust_kernels import ops
from rust_kernels.bench import parse_shape

EPS = 1e-5
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}


def pair(shape: tuple[int, ...], dtype: str) -> Callable[[], None]:
    def make(scale: float, shift: float) -> torch.Tensor:
        t = torch.randn(shape, device="cuda") * scale + shift
        return t.to(DTYPES[dtype]).contiguous(memory_format=torch.channels_last)

    x, dy = make(2, 1), make(1, 0)
    c = shape[1]
    w, b = torch.rand(c, device="cuda") + 0.5, torch.randn(c, device="cuda")
    rm, rv = torch.zeros(c, device="cuda"), torch.ones(c, device="cuda")

    def ours() -> None:
        _, sm, si = ops.batch_norm_2d_forward(x, w, b, rm, rv, True, 0.1, EPS)
        ops.batch_norm_2d_backward(dy, x, w, rm, rv, sm, si, True, EPS)

    return ours


calls = [(arg, pair(parse_shape(arg.split(":")[0]), arg.split(":")[1])) for arg in sys.argv[1:]]
for _, call in calls:
    call(), call()
torch.cuda.synchronize()
torch.cuda.profiler.start()
for _, call in calls:
    call()
torch.cuda.synchronize()
torch.cuda.profiler.stop()
for arg, call in calls:
    times = []
    for _ in range(50):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000)
    print(f"{arg}: {sorted(times)[25]:.1f} us a forward + backward (events, median of 50; L2 not flushed)", flush=True)
