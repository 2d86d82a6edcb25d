"""The eval ops at H*W = 1 ([B, C] memory: NCHW and NHWC at once): every candidate plan of the NCHW eval forward
and backward, the NCHW kernels' and the channels_last kernels' (candidates since this change), and the rule before
it (the NCHW kernels'), timed interleaved with PyTorch eager, torch.compile of the same maths and a same-bytes copy,
each plan's outputs checked against the rule's plan and it against torch's (a one-off probe, from the repository
root). Every plan's median goes to plans.csv.

    python probe.py build DEST   # here: every candidate's sm_90 kernel (and the training ops'), into DEST to carry
    python probe.py time         # on the GPU (RUST_KERNELS_CACHE_DIR=DEST)
    python probe.py entries DIR  # the tuning entries under DIR (a tuning cache's files) as CSV, on stdout
"""

import csv
import json
import os
import sys
from pathlib import Path

from rust_kernels import builder, cache, ops
from rust_kernels.bench.baselines.batch_norm import Backward, ForwardInference, Training
from rust_kernels.bench.ops import device_tensors, reset_compiled
from rust_kernels.families.batch_norm import backward, forward
from rust_kernels.runtime import Placement

SHAPES = [(8, 4096), (32, 2560), (256, 4096), (1024, 2048), (1024, 4096),  # the suite's H*W = 1 shapes (C > 1)
          (32, 512), (64, 1280), (128, 2048), (256, 1024)]  # fmt: skip
DTYPES = ("f32", "bf16-f32")
PLACEMENT = Placement(16, 132)  # 16-byte aligned arrays (torch's allocator), 132 SMs (H100 SXM and H200)
FAMILIES = {ForwardInference(): ops.batch_norm_2d_nchw_forward_inference, Backward(): ops.batch_norm_2d_nchw_backward}


def candidates(fn, family, shape, dtype):
    """The rule's plan before this change (the NCHW kernels': at these shapes the streaming forward, no packs at
    H*W = 1, and the warp-per-channel backward), then the op's candidates, the rule's first."""
    arrays = family.inputs((*shape, 1, 1), dtype)
    named = tuple(arrays.get(i.name) for i in fn.op.inputs)
    _, problem = fn.op.problem(named, tuple(s.default for s in fn.op.scalars), "host")
    if fn is ops.batch_norm_2d_nchw_backward:
        before = backward.warp(shape[1], 128, 0, problem.dtype, problem.param)
    else:
        before = forward.flat((*shape, 1, 1), problem.dtype, problem.param, 0, PLACEMENT.sms)
    return before, fn.op.candidates(problem, PLACEMENT)


def training_candidates(shape, dtype):
    """The training-mode forward's and backward's candidates (both layouts' kernels at H*W = 1 already), for
    `bench --family batch_norm_2d_training` with the tuner on."""
    family = Training(channels_last=False)
    arrays = family.inputs((*shape, 1, 1), dtype)
    x, weight, mean = arrays["x"], arrays["weight"], arrays["running_mean"]
    saved = mean.astype("float32")
    calls = ((ops.batch_norm_2d_forward, (x, weight, weight, mean, mean), (True, 0.1, 1e-5)),
             (ops.batch_norm_2d_backward, (x, x, weight, mean, mean, saved, saved), (True, 1e-5, True)))  # fmt: skip
    for fn, named, scalars in calls:
        yield from fn.op.candidates(fn.op.problem(named, scalars, "host")[1], PLACEMENT)


def build(dest: Path) -> None:
    kernels = {launch.kernel.id: launch.kernel for family, fn in FAMILIES.items() for shape in SHAPES
               for dtype in DTYPES for plan in (lambda b, c: (b, *c))(*candidates(fn, family, shape, dtype))
               for launch in plan.launches}  # fmt: skip
    kernels.update((launch.kernel.id, launch.kernel) for shape in SHAPES for dtype in DTYPES
                   for plan in training_candidates(shape, dtype) for launch in plan.launches)  # fmt: skip
    cache.export(builder.cached_entries([(k, "sm_90") for k in kernels.values()], builder.default_jobs()), dest)
    print(f"{len(kernels)} kernels in {dest}")


def label(plan) -> str:
    layout = "nhwc" if getattr(plan.kernel, "channels_last", 0) else "nchw"
    return f"{layout}:{plan.kernel.name.removeprefix('batch_norm_2d_')}:{plan.grid}:{dict(plan.values)}"


def time() -> None:
    import torch

    from rust_kernels.bench.timing import GpuTimer

    timer = GpuTimer(torch, 15)
    print(torch.cuda.get_device_name(), flush=True)
    rows = ["op,dtype,shape,plan,us"]
    for family, fn in FAMILIES.items():
        for dtype in DTYPES:
            for shape in SHAPES:
                reset_compiled(torch)
                tensors = device_tensors(family, (*shape, 1, 1), dtype)
                calls = family.bench_calls(tensors)
                args = [tensors[i.name] for i in fn.op.inputs]
                before, plans = candidates(fn, family, shape, dtype)
                want = fn(*args, eps=1e-5, plan=plans[0])
                worst = vs_torch = 0.0
                for p in (before, *plans, "torch"):
                    got = calls["torch"]() if p == "torch" else fn(*args, eps=1e-5, plan=p)
                    pairs = zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,),
                                strict=True)  # fmt: skip
                    for a, b in pairs:
                        diff = ((a.float() - b.float()).abs() / (b.float().abs() + 1e-3)).max().item()
                        if p == "torch":
                            vs_torch = max(vs_torch, diff)
                        else:
                            worst = max(worst, diff)
                run = lambda p, fn=fn, args=args: lambda: fn(*args, eps=1e-5, plan=p)  # noqa: E731
                timed = {"before": run(before), **{label(p): run(p) for p in plans}}
                timed.update({k: calls[k] for k in ("torch", "compile", "bound")})
                us = timer.medians_us(timed)
                where = f"{shape[0]}x{shape[1]}x1x1"
                rows += [f'{family.name},{dtype},{where},"{k}",{v:.3f}' for k, v in us.items()]
                best = {lay: min(v for k, v in us.items() if k.startswith(lay)) for lay in ("nchw", "nhwc")}
                print(f"{family.name} {dtype} {where}: before {us['before']:.2f} | rule {us[label(plans[0])]:.2f} "
                      f"({label(plans[0]).split(':')[0]}) | best nchw {best['nchw']:.2f} | best nhwc "
                      f"{best['nhwc']:.2f} | torch {us['torch']:.2f} | compile {us['compile']:.2f} | bound "
                      f"{us['bound']:.2f} | worst rel diff {worst:.1e}, rule vs torch {vs_torch:.1e}",
                      flush=True)  # fmt: skip
    Path(os.environ.get("OUT", "."), "plans.csv").write_text("\n".join(rows) + "\n")


def entries(directory: Path) -> None:
    out = csv.writer(sys.stdout)
    out.writerow(("key", "plan", "us", "reason"))
    for path in sorted(directory.glob("**/*.json")):
        entry = json.loads(path.read_text())
        out.writerow(entry[k] for k in ("key", "plan", "us", "reason"))


if __name__ == "__main__":
    mode, *rest = sys.argv[1:]
    {"build": build, "entries": entries, "time": time}[mode](*map(Path, rest))
