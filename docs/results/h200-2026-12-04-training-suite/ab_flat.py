"""A/B on the GPU: the training-mode NCHW forward + backward where no 16-byte pack divides H*W, its elementwise
launches in the widest pack dividing the rows (one element at a time where none does: VECTORIZED 0, before; 8-byte
packs: 2) against 16-byte packs over the flat tensor (training.FLAT), the same reductions, splits and grids (the
rule's), in one process; GPU time, L2 flushed (bench.timing.GpuTimer)."""

import sys

import torch

from rust_kernels import ops
from rust_kernels.bench import parse_shape
from rust_kernels.bench.timing import GpuTimer
from rust_kernels.families.batch_norm import training

EPS = 1e-5
timer = GpuTimer(torch, reps=30)
print(f"{'shape':>18} {'dtype':>8} {'mode':>4} {'rows (us)':>9} {'flat (us)':>9} {'gain':>6}  max |y|,|dx| diff")
for text in sys.argv[1:]:
    shape = parse_shape(text)
    for dtype, param in (("bf16", "f32"), ("f32", "f32")):
        act = {"bf16": torch.bfloat16, "f32": torch.float32}[dtype]
        x = (torch.randn(shape, device="cuda") * 2 + 1).to(act)
        dy = torch.randn(shape, device="cuda").to(act)
        weight, bias = torch.rand(shape[1], device="cuda") + 0.5, torch.randn(shape[1], device="cuda")
        mean, var = torch.zeros(shape[1], device="cuda"), torch.ones(shape[1], device="cuda")
        vectorized = training.vector_mode(shape, dtype, 16, False)
        if not training.flat_fits(shape, dtype):
            continue
        times, outs = [], []
        for packs in (vectorized, training.FLAT):
            fwd = training.forward(shape, dtype, param, vectorized, False, 132, packs=packs)
            bwd = training.backward(shape, dtype, param, vectorized, False, 132, packs=packs)

            def step(fwd=fwd, bwd=bwd, x=x, dy=dy, weight=weight, bias=bias, mean=mean, var=var):
                y, sm, si = ops.batch_norm_2d_forward(x, weight, bias, mean, var, True, 0.1, EPS, plan=fwd)
                dx, _, _ = ops.batch_norm_2d_backward(dy, x, weight, mean, var, sm, si, True, EPS, plan=bwd)
                return y, dx

            outs.append(step())
            times.append(timer.median_us(step))
        diff = [float((a.float() - b.float()).abs().max()) for a, b in zip(*outs, strict=True)]
        gain = times[0] / times[1]
        print(f"{text:>18} {dtype:>8} {vectorized:>4} {times[0]:9.1f} {times[1]:9.1f} {gain:5.2f}x  {diff}", flush=True)
