"""The NCHW eval backward where no 16-byte pack divides H*W (7x7, 14x14 in 16-bit): every candidate plan, the
grouped kernel's (batch_norm_2d_frozen_backward_grouped, new: groups of adjacent channels read as 16-byte packs)
among them, against the rule's (the split kernel, one element or 8-byte pack at a time), timed interleaved with
PyTorch eager, torch.compile of the same maths and a same-bytes copy; each plan's outputs checked against the rule's
and the rule's against torch's. Every plan's median goes to plans.csv.

    python probe.py time         # on the GPU (RUST_KERNELS_CACHE_DIR holding the kernels, the tuning off)

../h100-2026-12-07-act-groups/probe_act.py runs time() over the BN + ReLU eval backward.
"""

import os
from pathlib import Path

from rust_kernels import ops
from rust_kernels.bench.baselines.batch_norm import Backward
from rust_kernels.bench.ops import device_tensors, reset_compiled
from rust_kernels.runtime import Placement

# The suite's weakest eval backward shapes on an H100 (docs/results/h100-2026-12-06-suite/: 0.65-0.82 of the bound
# in bf16) and more of the class, batch 1 to 128.
SHAPES = [(128, 992, 7, 7), (128, 864, 7, 7), (128, 672, 7, 7), (32, 672, 7, 7), (32, 544, 7, 7), (32, 2048, 7, 7),
          (32, 992, 14, 14), (128, 480, 14, 14), (32, 864, 14, 14), (32, 200, 14, 14), (1, 1024, 7, 7),
          (1, 608, 7, 7)]  # fmt: skip
DTYPES = ("bf16-f32", "f32")
PLACEMENT = Placement(16, 132)  # 16-byte aligned arrays (torch's allocator), 132 SMs (H100 SXM and H200)
FN = ops.batch_norm_2d_nchw_backward


def candidates(shape, dtype, fn=FN, family=None, scalars=None):
    """The op's candidates, the rule's plan first (`scalars`: by name, the op's defaults for the others)."""
    arrays = (family or Backward()).inputs(shape, dtype)
    named = tuple(arrays.get(i.name) for i in fn.op.inputs)
    values = tuple((scalars or {}).get(s.name, s.default) for s in fn.op.scalars)
    _, problem = fn.op.problem(named, values, "host")
    return fn.op.candidates(problem, PLACEMENT)


def label(plan) -> str:
    return f"{plan.kernel.name.removeprefix('batch_norm_2d_')}:{plan.grid}:{dict(plan.values)}"


def relative(a, b) -> float:
    return ((a.float() - b.float()).abs().max() / (b.float().abs().max() + 1e-6)).item()


def time(cases=None, fn=FN, family=None, scalars=None, grouped_name="frozen_backward_grouped",
         csv="plans.csv") -> None:  # fmt: skip
    """Every candidate of `fn` (by default the eval backward, over DTYPES x SHAPES) on each (dtype, shape) of
    `cases`, called with `scalars` (by name; eps=1e-5 by default), against `family`'s torch columns; the kernel
    `grouped_name`'s best apart from the others'. The medians to OUT/`csv`."""
    import torch

    from rust_kernels.bench.timing import GpuTimer

    timer = GpuTimer(torch, 15)
    print(torch.cuda.get_device_name(), flush=True)
    rows = ["dtype,shape,plan,us"]
    family = family or Backward()
    scalars = scalars or {"eps": 1e-5}
    for dtype, shape in cases or [(d, s) for d in DTYPES for s in SHAPES]:
        reset_compiled(torch)
        tensors = device_tensors(family, shape, dtype)
        calls = family.bench_calls(tensors)
        args = [tensors[i.name] for i in fn.op.inputs]
        plans = candidates(shape, dtype, fn, family, scalars)
        want = fn(*args, **scalars, plan=plans[0])
        worst = max(relative(got, ref) for p in plans
                    for got, ref in zip(fn(*args, **scalars, plan=p), want, strict=True))  # fmt: skip
        vs_torch = max(relative(got, ref) for got, ref in zip(want, calls["torch"](), strict=True))
        run = lambda p, args=args: lambda: fn(*args, **scalars, plan=p)  # noqa: E731
        timed = {label(p): run(p) for p in plans}
        timed.update({k: calls[k] for k in ("torch", "compile", "bound")})
        us = timer.medians_us(timed)
        where = "x".join(map(str, shape))
        rows += [f'{dtype},{where},"{k}",{v:.3f}' for k, v in us.items()]
        grouped = [v for k, v in us.items() if k.startswith(grouped_name + ":")]
        others = [v for k, v in us.items() if ":" in k and not k.startswith(grouped_name + ":")]
        best = min(us[k] for k in us if ":" in k)
        print(f"{dtype} {where}: rule {us[label(plans[0])]:.2f} ({plans[0].kernel.name}) | best grouped "
              f"{min(grouped, default=float('nan')):.2f} | best other {min(others):.2f} | torch {us['torch']:.2f} "
              f"| compile {us['compile']:.2f} | bound {us['bound']:.2f} ({us['bound'] / best:.2f} of it) | max rel "
              f"diff between plans {worst:.1e}, rule vs torch {vs_torch:.1e}", flush=True)  # fmt: skip
        Path(os.environ.get("OUT", "."), csv).write_text("\n".join(rows) + "\n")


if __name__ == "__main__":
    time()
