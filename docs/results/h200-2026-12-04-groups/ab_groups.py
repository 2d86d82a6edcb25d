"""A/B on the GPU, in one process: for each shape, dtype and direction of the training-mode NCHW BatchNorm2d, every
plan the autotuner times (training._candidates) timed here, the best of those before this change (no reduction
over groups of channels) against the best of the new ones (training.GROUPS); GPU time, L2 flushed
(bench.timing.GpuTimer), median of 20. Also the new best's results against the old best's (max |diff|)."""

import sys

import torch

from rust_kernels import ops
from rust_kernels.bench import parse_shape
from rust_kernels.bench.timing import GpuTimer
from rust_kernels.families.batch_norm import training

EPS = 1e-5
SMS = torch.cuda.get_device_properties(0).multi_processor_count
timer = GpuTimer(torch, reps=20)
print(
    f"{'shape':>16} {'dtype':>5} {'dir':>8} {'plans':>5} {'old (us)':>8} {'new (us)':>8} {'gain':>6}  "
    f"max diff  new plan"
)
for text in sys.argv[1:]:
    shape = parse_shape(text)
    for dtype, param in (("bf16", "f32"), ("f32", "f32")):
        act = {"bf16": torch.bfloat16, "f32": torch.float32}[dtype]
        x = (torch.randn(shape, device="cuda") * 2 + 1).to(act)
        dy = torch.randn(shape, device="cuda").to(act)
        weight, bias = torch.rand(shape[1], device="cuda") + 0.5, torch.randn(shape[1], device="cuda")
        mean, var = torch.zeros(shape[1], device="cuda"), torch.ones(shape[1], device="cuda")
        _, save_mean, save_invstd = ops.batch_norm_2d_forward(x, weight, bias, mean, var, True, 0.1, EPS)
        for which in ("forward", "backward"):
            plans = training._candidates(which, shape, dtype, param, 16, SMS, False, 0)

            def run(
                plan, which=which, x=x, dy=dy, weight=weight, bias=bias, m=mean, v=var, sm=save_mean, si=save_invstd
            ):
                if which == "forward":
                    return ops.batch_norm_2d_forward(x, weight, bias, m, v, True, 0.1, EPS, plan=plan)
                return ops.batch_norm_2d_backward(dy, x, weight, m, v, sm, si, True, EPS, plan=plan)

            times = [(timer.median_us(lambda p=p: run(p)), i, p) for i, p in enumerate(plans)]
            grouped = [t for t in times if t[2].kernel.vectorized == training.GROUPS]
            if not grouped:  # rows of GROUP_ROW_BYTES or more: not a candidate
                continue
            old = min(t for t in times if t[2].kernel.vectorized != training.GROUPS)
            new = min(grouped)
            pairs = zip(run(old[2]), run(new[2]), strict=True)
            diff = max(float((a.float() - b.float()).abs().max()) for a, b in pairs)
            print(
                f"{text:>16} {dtype:>5} {which:>8} {len(times):5d} {old[0]:8.1f} {new[0]:8.1f} "
                f"{old[0] / new[0]:5.2f}x  {diff:.2g}  {new[2].label}",
                flush=True,
            )
