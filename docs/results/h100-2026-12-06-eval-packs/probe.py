"""The NCHW eval forward where no pack divides H*W (7x7, 17x17, 35x35 maps): every candidate plan, the packed frozen
forward's (batch_norm_2d_frozen_forward, new) among them, against the rule's (when it ran, the streaming kernel, one
element at a time; since, the packed kernel from 1 MiB of x on), timed interleaved with PyTorch eager, torch.compile
of the same maths and a same-bytes copy; each plan's output checked against the rule's and it against torch's (a
one-off probe, from the repository root). Every plan's median goes to plans.csv. It decided that the rule takes the
packed kernel (README.md, device_h100/).

    python probe.py build DEST   # here: every candidate's sm_90 kernel, into DEST to carry
    python probe.py time         # on the GPU (RUST_KERNELS_CACHE_DIR=DEST)
"""

import os
import sys
from pathlib import Path

from rust_kernels import builder, cache, ops
from rust_kernels.bench.baselines.batch_norm import ForwardInference
from rust_kernels.bench.ops import device_tensors, reset_compiled
from rust_kernels.runtime import Placement

# The suite's weakest eval forward shapes (docs/results/h100-2026-12-06-suite/: 0.50-0.73 of the bound in bf16 on an
# H100) and more of the class: Inception's 17x17 and 35x35, batch 1.
SHAPES = [(128, 992, 7, 7), (128, 864, 7, 7), (128, 672, 7, 7), (32, 544, 7, 7), (32, 2048, 7, 7), (1, 1024, 7, 7),
          (1, 192, 17, 17), (32, 768, 17, 17), (128, 288, 35, 35), (32, 96, 35, 35)]  # fmt: skip
DTYPES = ("bf16-f32", "f32")
PLACEMENT = Placement(16, 132)  # 16-byte aligned arrays (torch's allocator), 132 SMs (H100 SXM and H200)
FN = ops.batch_norm_2d_nchw_forward_inference


def candidates(shape, dtype):
    """The op's candidates, the rule's plan first."""
    arrays = ForwardInference().inputs(shape, dtype)
    named = tuple(arrays.get(i.name) for i in FN.op.inputs)
    _, problem = FN.op.problem(named, tuple(s.default for s in FN.op.scalars), "host")
    return FN.op.candidates(problem, PLACEMENT)


def build(dest: Path) -> None:
    kernels = {launch.kernel.id: launch.kernel for shape in SHAPES for dtype in DTYPES
               for plan in candidates(shape, dtype) for launch in plan.launches}  # fmt: skip
    cache.export(builder.cached_entries([(k, "sm_90") for k in kernels.values()], builder.default_jobs()), dest)
    print(f"{len(kernels)} kernels in {dest}")


def label(plan) -> str:
    return f"{plan.kernel.name.removeprefix('batch_norm_2d_')}:{plan.grid}:{dict(plan.values)}"


def time() -> None:
    import torch

    from rust_kernels.bench.timing import GpuTimer

    timer = GpuTimer(torch, 15)
    print(torch.cuda.get_device_name(), flush=True)
    rows = ["dtype,shape,plan,us"]
    family = ForwardInference()
    for dtype in DTYPES:
        for shape in SHAPES:
            reset_compiled(torch)
            tensors = device_tensors(family, shape, dtype)
            calls = family.bench_calls(tensors)
            args = [tensors[i.name] for i in FN.op.inputs]
            plans = candidates(shape, dtype)
            want = FN(*args, eps=1e-5, plan=plans[0])
            worst = max((FN(*args, eps=1e-5, plan=p).float() - want.float()).abs().max().item() for p in plans)
            vs_torch = ((calls["torch"]().float() - want.float()).abs() / (want.float().abs() + 1e-3)).max().item()
            run = lambda p, args=args: lambda: FN(*args, eps=1e-5, plan=p)  # noqa: E731
            timed = {label(p): run(p) for p in plans}
            timed.update({k: calls[k] for k in ("torch", "compile", "bound")})
            us = timer.medians_us(timed)
            where = "x".join(map(str, shape))
            rows += [f'{dtype},{where},"{k}",{v:.3f}' for k, v in us.items()]
            packed = [v for k, v in us.items() if k.startswith("frozen_forward:")]
            others = [v for k, v in us.items() if ":" in k and not k.startswith("frozen_forward:")]
            rule = plans[0].kernel.name.removeprefix("batch_norm_2d_")
            print(f"{dtype} {where}: rule {us[label(plans[0])]:.2f} ({rule}) | best "
                  f"packed {min(packed):.2f} | best other {min(others):.2f} | torch {us['torch']:.2f} | compile "
                  f"{us['compile']:.2f} | bound {us['bound']:.2f} | max abs diff between plans {worst:.1e}, rule vs "
                  f"torch rel {vs_torch:.1e}", flush=True)  # fmt: skip
    Path(os.environ.get("OUT", "."), "plans.csv").write_text("\n".join(rows) + "\n")


if __name__ == "__main__":
    mode, *rest = sys.argv[1:]
    {"build": build, "time": time}[mode](*map(Path, rest))
