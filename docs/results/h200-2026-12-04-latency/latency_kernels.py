"""Runs one training-mode forward + backward per shape argument ("BxCxHxW:dtype[:cl][@F,K]"), ours with the plans
the shipped table serves (with @F,K: the NCHW one-launch kernels, CTAs of F and K threads), then torch's eager batch
norm, between cudaProfilerStart/Stop (for
`ncu --profile-from-start off`): two warm-up pairs outside the range, one pair inside it."""

import sys

import torch

from rust_kernels import ops
from rust_kernels.bench import parse_shape
from rust_kernels.families.batch_norm import training

EPS = 1e-5
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}


def pair(shape: tuple[int, ...], dtype: str, channels_last: bool, blocks: list[int]):
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x = (torch.randn(shape, device="cuda") * 2 + 1).to(DTYPES[dtype]).contiguous(memory_format=fmt)
    dy = torch.randn(shape, device="cuda").to(DTYPES[dtype]).contiguous(memory_format=fmt)
    c = shape[1]
    w, b = torch.rand(c, device="cuda") + 0.5, torch.randn(c, device="cuda")
    rm, rv = torch.zeros(c, device="cuda"), torch.ones(c, device="cuda")

    mode = training.vector_mode(shape, dtype, 16, channels_last)
    fwd, bwd = (training.fused(which, shape, dtype, "f32", mode, block) if blocks else None
                for which, block in zip(("forward", "backward"), blocks or (0, 0), strict=True))  # fmt: skip

    def ours():
        _, sm, si = ops.batch_norm_2d_forward(x, w, b, rm, rv, True, 0.1, EPS, plan=fwd)
        ops.batch_norm_2d_backward(dy, x, w, rm, rv, sm, si, True, EPS, plan=bwd)

    def eager():
        xr = x.detach().requires_grad_()
        wr, br = w.detach().requires_grad_(), b.detach().requires_grad_()
        with torch.autocast("cuda", torch.bfloat16, enabled=dtype == "bf16"):
            y = torch.nn.functional.batch_norm(xr, rm, rv, wr, br, True, 0.1, EPS)
        y.backward(dy)

    return ours, eager


calls = []
for arg in sys.argv[1:]:
    arg, _, blocks = arg.partition("@")
    text, dtype, *cl = arg.split(":")
    calls += pair(parse_shape(text), dtype, bool(cl), [int(b) for b in blocks.split(",") if b])
for call in calls:
    call(), call()
torch.cuda.synchronize()
torch.cuda.profiler.start()
for call in calls:
    call()
torch.cuda.synchronize()
torch.cuda.profiler.stop()
