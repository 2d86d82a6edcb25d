"""A/B on the GPU: the training-mode NCHW forward + backward where no 16-byte pack divides H*W and the elementwise
launches take 16-byte packs over the flat tensor (training.FLAT), its two reductions (batch_stats, backward_reduce)
reading the rows in the widest pack dividing them (one element at a time where none does: before) against masked
16-byte packs (VECTORIZED = FLAT: after). The same elementwise kernels, the rule's splits for each mode and the
rule's grids, in one process; GPU time, L2 flushed (bench.timing.GpuTimer)."""

import sys

import torch

from rust_kernels import ops
from rust_kernels.bench import parse_shape
from rust_kernels.bench.timing import GpuTimer
from rust_kernels.families.batch_norm import training

EPS = 1e-5
timer = GpuTimer(torch, reps=30)
print(f"{'shape':>18} {'dtype':>8} {'rows (us)':>9} {'masked (us)':>11} {'gain':>6}  max |y|,|dx|,|dw| diff")
for text in sys.argv[1:]:
    shape = parse_shape(text)
    for dtype, param in (("bf16", "f32"), ("f32", "f32")):
        if not training.flat_fits(shape, dtype):
            continue
        act = {"bf16": torch.bfloat16, "f32": torch.float32}[dtype]
        x = (torch.randn(shape, device="cuda") * 2 + 1).to(act)
        dy = torch.randn(shape, device="cuda").to(act)
        weight, bias = torch.rand(shape[1], device="cuda") + 0.5, torch.randn(shape[1], device="cuda")
        mean, var = torch.zeros(shape[1], device="cuda"), torch.ones(shape[1], device="cuda")
        rows = training.vector_mode(shape, dtype, 16, False)
        times, outs = [], []
        for mode in (rows, training.FLAT):
            fwd = training.forward(shape, dtype, param, mode, False, 132, packs=training.FLAT)
            bwd = training.backward(shape, dtype, param, mode, False, 132, packs=training.FLAT)

            def step(fwd=fwd, bwd=bwd, x=x, dy=dy, weight=weight, bias=bias, mean=mean, var=var):
                y, sm, si = ops.batch_norm_2d_forward(x, weight, bias, mean, var, True, 0.1, EPS, plan=fwd)
                dx, dw, _ = ops.batch_norm_2d_backward(dy, x, weight, mean, var, sm, si, True, EPS, plan=bwd)
                return y, dx, dw

            outs.append(step())
            times.append(timer.median_us(step))
        diff = [f"{float((a.float() - b.float()).abs().max()):.2g}" for a, b in zip(*outs, strict=True)]
        gain = times[0] / times[1]
        print(f"{text:>18} {dtype:>8} {times[0]:9.1f} {times[1]:11.1f} {gain:5.2f}x  {diff}", flush=True)
