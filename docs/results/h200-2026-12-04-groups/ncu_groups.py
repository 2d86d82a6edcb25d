"""Runs one training-mode NCHW forward + backward per argument "BxCxHxW:dtype:mode:split", two launches each (the
reductions in pack mode `mode` at `split`, the elementwise launches in the rule's), between cudaProfilerStart/Stop
(for `ncu --profile-from-start off`): two warm-up pairs outside the range, one inside."""

import sys

import torch

from rust_kernels import ops
from rust_kernels.bench import parse_shape
from rust_kernels.families.batch_norm import training

EPS = 1e-5
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
SMS = torch.cuda.get_device_properties(0).multi_processor_count


def pair(shape: tuple[int, ...], dtype: str, mode: int, split: int):
    x = (torch.randn(shape, device="cuda") * 2 + 1).to(DTYPES[dtype])
    dy = torch.randn(shape, device="cuda").to(DTYPES[dtype])
    c = shape[1]
    w, b = torch.rand(c, device="cuda") + 0.5, torch.randn(c, device="cuda")
    rm, rv = torch.zeros(c, device="cuda"), torch.ones(c, device="cuda")
    packs = training.elementwise_mode(shape, dtype, 16, False)
    fwd = training.forward(shape, dtype, "f32", mode, False, SMS, split, packs=packs)
    bwd = training.backward(shape, dtype, "f32", mode, False, SMS, split, packs=packs)

    def ours():
        _, sm, si = ops.batch_norm_2d_forward(x, w, b, rm, rv, True, 0.1, EPS, plan=fwd)
        ops.batch_norm_2d_backward(dy, x, w, rm, rv, sm, si, True, EPS, plan=bwd)

    return ours


calls = []
for arg in sys.argv[1:]:
    text, dtype, mode, split = arg.split(":")
    calls.append(pair(parse_shape(text), dtype, int(mode), int(split)))
for call in calls:
    call(), call()
torch.cuda.synchronize()
torch.cuda.profiler.start()
for call in calls:
    call()
torch.cuda.synchronize()
torch.cuda.profiler.stop()
