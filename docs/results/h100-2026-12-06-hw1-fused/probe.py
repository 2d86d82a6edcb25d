"""The fused forms of BatchNorm at H*W = 1 ([B, C] memory: NCHW and NHWC at once): every candidate plan of the eval
act forward (ReLU), the eval add + ReLU forward, the training add + ReLU forward and the eval act backward (ReLU),
both layouts' kernels, and the rule before this change (NCHW kernels for the forwards; the backward's rule is
unchanged), timed interleaved with PyTorch eager, torch.compile of the same maths and a same-bytes copy (the
training forward: none), each plan's outputs checked against the rule's plan and it against torch's (a one-off
probe, from the repository root). Every plan's median goes to plans_DTYPE.csv.

`training DTYPE`: the training forward's and backward's candidates at H*W = 1 (an NCHW call), the channels_last
one-launch kernels among them since this change, each direction's plans timed interleaved, then the forward +
backward pair of the rule before and now (and of the best plans) with torch eager, torch.compile of the same maths
and the 8-pass copy (training_DTYPE.csv).

    python probe.py build DEST       # here: every candidate's sm_90 kernel, into DEST to carry
    python probe.py time DTYPE       # on the GPU (RUST_KERNELS_CACHE_DIR=DEST, RUST_KERNELS_TUNING=off)
    python probe.py training DTYPE   # likewise
"""

import math
import os
import sys
from pathlib import Path

from rust_kernels import builder, cache, ops
from rust_kernels.bench.baselines.batch_norm import EPS, EvalFused, EvalFusedBackward, Training
from rust_kernels.bench.ops import device_tensors, reset_compiled
from rust_kernels.errors import ArgumentError
from rust_kernels.families.batch_norm import common, frozen_fused, residual, training
from rust_kernels.kernels import BatchNorm2dFrozenForwardAct, BatchNorm2dFrozenForwardAddRelu
from rust_kernels.runtime import Placement

SHAPES = [(8, 4096), (32, 2560), (256, 4096), (1024, 2048), (1024, 4096),  # the suite's H*W = 1 shapes (C > 1)
          (32, 512), (64, 1280), (128, 2048), (256, 1024)]  # fmt: skip
DTYPES = ("f32", "bf16-f32")
PLACEMENT = Placement(16, 132)  # 16-byte aligned arrays (torch's allocator), 132 SMs (H100 SXM and H200)
# case: (inputs' family, op, scalars after the arrays, the old rule's forward kernel: None = rule unchanged)
CASES = {
    "act_eval_forward": (EvalFused(False, False), ops.batch_norm_2d_act_eval_forward, (EPS, "relu"),
                         BatchNorm2dFrozenForwardAct),
    "add_relu_eval_forward": (EvalFused(False, True), ops.batch_norm_2d_add_relu_eval_forward, (EPS,),
                              BatchNorm2dFrozenForwardAddRelu),
    "add_relu_forward": (EvalFused(False, True), ops.batch_norm_2d_add_relu_forward, (0.1, EPS), "training"),
    "act_eval_backward": (EvalFusedBackward(False, False), ops.batch_norm_2d_act_eval_backward, (EPS, "relu"), None),
}  # fmt: skip


def problem_of(fn, arrays, scalars):
    return fn.op.problem(tuple(arrays[i.name] for i in fn.op.inputs), scalars, "host")[1]


def plans(case, shape, dtype):
    """(the rule before this change or None, the op's candidates, the rule's first)."""
    family, fn, scalars, old = CASES[case]
    problem = problem_of(fn, family.inputs((*shape, 1, 1), dtype), scalars)
    candidates = fn.op.candidates(problem, PLACEMENT)
    if old is None:
        return None, candidates
    if old == "training":
        full, align = (*shape, 1, 1), PLACEMENT.alignment
        vectorized = training.vector_mode(full, problem.dtype, align, False)
        packs = training.elementwise_mode(full, problem.dtype, align, False)
        sms = PLACEMENT.sms
        before = residual.forward_plan(full, problem.dtype, problem.param, vectorized, False, sms, packs=packs)
        return before, candidates
    return frozen_fused._launch(old, problem, PLACEMENT, False), candidates


def training_problems(shape, dtype):
    """{direction: (op, problem)} of the NCHW training ops on `shape` ([B, C, H, W])."""
    arrays = Training(channels_last=False).inputs(shape, dtype)
    x, weight, mean = arrays["x"], arrays["weight"], arrays["running_mean"]
    saved = mean.astype("float32")
    calls = {
        "forward": (ops.batch_norm_2d_forward, (x, weight, weight, mean, mean), (True, 0.1, EPS)),
        "backward": (ops.batch_norm_2d_backward, (x, x, weight, mean, mean, saved, saved), (True, EPS, True)),
    }
    return {which: (fn.op, fn.op.problem(named, scalars, "host")[1]) for which, (fn, named, scalars) in calls.items()}


def training_plans(shape, dtype):
    """Per direction (the rule before this change: the two-launch plan, channels_last from 64 KiB of x on; the
    candidates, the rule's first) of the NCHW training ops."""
    full, placement = (*shape, 1, 1), PLACEMENT
    out = {}
    for which, (op, problem) in training_problems(full, dtype).items():
        nhwc = common.nhwc_rule(full, problem.dtype, training.NHWC_MIN_BYTES)
        vectorized = training.vector_mode(full, problem.dtype, placement.alignment, nhwc)
        packs = training.elementwise_mode(full, problem.dtype, placement.alignment, nhwc)
        build = training.forward if which == "forward" else training.backward
        before = build(full, problem.dtype, problem.param, vectorized, nhwc, placement.sms, packs=packs)
        out[which] = (before, op.candidates(problem, placement))
    return out


def build(dest: Path) -> None:
    kernels = {launch.kernel.id: launch.kernel for case in CASES for shape in SHAPES for dtype in DTYPES
               for plan in (lambda b, c: (*([b] if b else []), *c))(*plans(case, shape, dtype))
               for launch in plan.launches}  # fmt: skip
    kernels.update((launch.kernel.id, launch.kernel) for shape in SHAPES for dtype in DTYPES
                   for before, candidates in training_plans(shape, dtype).values()
                   for plan in (before, *candidates) for launch in plan.launches)  # fmt: skip
    cache.export(builder.cached_entries([(k, "sm_90") for k in kernels.values()], builder.default_jobs()), dest)
    print(f"{len(kernels)} kernels in {dest}")


def kind(plan) -> str:
    """A plan's kind: the layout its kernels read, one launch or two (persistent: cooperative)."""
    layout = "nhwc" if training.reads_channels_last(plan.launches[-1].kernel) else "nchw"
    launches = "persistent" if "persistent" in plan.kernel.name else f"{len(plan.launches)}launch"
    return f"{layout}-{launches}"


def label(plan) -> str:
    layout = "nhwc" if training.reads_channels_last(plan.launches[-1].kernel) else "nchw"
    names = "+".join(p.kernel.id.removeprefix("batch_norm_2d_") for p in plan.launches)
    return f"{layout}:{names}:{[(p.grid[0], *(v for _, v in p.values)) for p in plan.launches]}"


def references(case, tensors):
    """torch eager, torch.compile and the bound of the case (the family's; the training forward: eager and compile of
    relu(F.batch_norm(x, training=True) + residual))."""
    import torch
    import torch.nn.functional as F

    family = CASES[case][0]
    if case != "add_relu_forward":
        return {k: v for k, v in family.bench_calls(tensors).items() if k in ("torch", "compile", "bound")}
    x, res, w, b, m, v = (tensors[n] for n in ("x", "residual", "weight", "bias", "running_mean", "running_var"))

    def maths(x, res, w, b, m, v):
        return torch.relu(F.batch_norm(x, m, v, w, b, True, 0.1, EPS) + res)

    compiled = torch.compile(maths, dynamic=False)
    return {"torch": lambda: maths(x, res, w, b, m, v), "compile": lambda: compiled(x, res, w, b, m, v)}


def first(out):
    return out if isinstance(out, tuple) else (out,)


def time(dtype: str) -> None:
    import torch

    from rust_kernels.bench.timing import GpuTimer

    timer = GpuTimer(torch, 15)
    print(torch.cuda.get_device_name(), flush=True)
    rows = ["op,dtype,shape,plan,us"]
    for case, (family, fn, scalars, _) in CASES.items():
        for shape in SHAPES:
            reset_compiled(torch)
            tensors = device_tensors(family, (*shape, 1, 1), dtype)
            args = [tensors[i.name] for i in fn.op.inputs]
            before, candidates = plans(case, shape, dtype)
            refs = references(case, tensors)
            want = first(fn(*args, *scalars, plan=candidates[0]))
            ours_out = want if case != "add_relu_forward" else want[:1]
            torch_out = first(refs["torch"]())
            vs_torch = max(((a.float() - b.float()).abs() / (b.float().abs() + 1e-3)).max().item()
                           for a, b in zip(ours_out, torch_out, strict=False))  # fmt: skip
            abs_torch = max(
                (a.float() - b.float()).abs().max().item() for a, b in zip(ours_out, torch_out, strict=False)
            )
            worst = 0.0
            for p in (*([before] if before else []), *candidates):
                got = first(fn(*args, *scalars, plan=p))
                worst = max(worst, *(((a.float() - b.float()).abs() / (b.float().abs() + 1e-3)).max().item()
                                     for a, b in zip(got, want, strict=True)))  # fmt: skip
            run = lambda p, fn=fn, args=args, scalars=scalars: lambda: fn(*args, *scalars, plan=p)  # noqa: E731
            timed = {**({"before": run(before)} if before else {}), **{label(p): run(p) for p in candidates}, **refs}
            us = timer.medians_us(timed)
            where = f"{shape[0]}x{shape[1]}x1x1"
            rows += [f'{case},{dtype},{where},"{k}",{v:.3f}' for k, v in us.items()]
            best = {lay: min((v for k, v in us.items() if k.startswith(lay)), default=math.nan)
                    for lay in ("nchw", "nhwc")}  # fmt: skip
            rule = label(candidates[0])
            extra = f"before {us['before']:.2f} | " if before else ""
            bound = f" | bound {us['bound']:.2f}" if "bound" in us else ""
            print(f"{case} {dtype} {where}: {extra}rule {us[rule]:.2f} ({rule.split(':')[0]}) | best nchw "
                  f"{best['nchw']:.2f} | best nhwc {best['nhwc']:.2f} | torch {us['torch']:.2f} | compile "
                  f"{us['compile']:.2f}{bound} | worst rel diff {worst:.1e}, rule vs torch {vs_torch:.1e} "
                  f"(abs {abs_torch:.1e})",
                  flush=True)  # fmt: skip
    Path(os.environ.get("OUT", "."), f"plans_{dtype}.csv").write_text("\n".join(rows) + "\n")


def runs(call) -> bool:
    """Whether the device runs a forced plan (a cooperative grid larger than fits at once is refused)."""
    try:
        call()
    except ArgumentError as refused:
        print(f"  refused: {refused}", flush=True)
        return False
    return True


def training_calls(shape, dtype):
    """(family, tensors, fwd, bwd) of the NCHW training ops on `shape` ([B, C, H, W]) on the GPU: fwd(plan) and
    bwd(plan) give a call of the forward or backward op with that plan (the backward from the batch's statistics)."""
    import torch

    family = Training(channels_last=False)
    t = device_tensors(family, shape, dtype)
    x, weight, bias, mean, var = (t[n] for n in ("x", "weight", "bias", "running_mean", "running_var"))
    dy = torch.randn_like(x)
    _, save_mean, save_invstd = ops.batch_norm_2d_forward(x, weight, bias, mean.clone(), var.clone(), True, 0.1, EPS)

    def fwd(p):
        return lambda: ops.batch_norm_2d_forward(x, weight, bias, mean, var, True, 0.1, EPS, plan=p)

    def bwd(p):
        return lambda: ops.batch_norm_2d_backward(dy, x, weight, mean, var, save_mean, save_invstd, True, EPS, True,
                                                  plan=p)  # fmt: skip

    return family, t, fwd, bwd


def training_shape(timer, shape, dtype, rows) -> None:
    """time_training's work for one shape: each direction's plans, then the pairs."""
    family, t, fwd, bwd = training_calls((*shape, 1, 1), dtype)
    where = f"{shape[0]}x{shape[1]}x1x1"
    plans_of, best, line = training_plans(shape, dtype), {}, []
    for which, (before, every) in plans_of.items():
        make = fwd if which == "forward" else bwd
        candidates = [p for p in every if runs(make(p))]  # less those the device refuses, as the tuner drops them
        plans_of[which] = (before, candidates)
        outputs = (lambda out: out[:1]) if which == "forward" else (lambda out: out)  # y; or dx, dweight, dbias
        want = outputs(make(candidates[0])())
        worst = 0.0
        for p in (before, *candidates):
            worst = max(worst, *(((a.float() - b.float()).abs() / (b.float().abs() + 1e-3)).max().item()
                                 for a, b in zip(outputs(make(p)()), want, strict=True)))  # fmt: skip
        us = timer.medians_us({"before": make(before), **{label(p): make(p) for p in candidates}})
        rows += [f'{which},{dtype},{where},"{k}",{v:.3f}' for k, v in us.items()]
        by_kind = {}
        for p in candidates:
            by_kind.setdefault(kind(p), []).append((us[label(p)], label(p), p))
        best[which] = min(e for v in by_kind.values() for e in v)[2]
        kinds = " | ".join(f"{k} {min(v)[0]:.2f}" for k, v in sorted(by_kind.items()))
        line.append(f"{which}: before {us['before']:.2f} | rule {us[label(candidates[0])]:.2f} "
                    f"({kind(candidates[0])}) | {kinds} | worst rel diff {worst:.1e}")  # fmt: skip
    refs = family.bench_calls(t)

    def pair(f, b):
        return lambda: (f(), b())

    us = timer.medians_us({"before": pair(fwd(plans_of["forward"][0]), bwd(plans_of["backward"][0])),
                           "rule": pair(fwd(plans_of["forward"][1][0]), bwd(plans_of["backward"][1][0])),
                           "best": pair(fwd(best["forward"]), bwd(best["backward"])),
                           **{k: refs[k] for k in ("torch", "compile", "bound")}})  # fmt: skip
    report_pairs(rows, dtype, where, line, us)


def report_pairs(rows, dtype, where, line, us) -> None:
    """A shape's pair timings `us` into the CSV rows, and its per-direction summary `line` and pairs printed."""
    rows += [f'pair,{dtype},{where},"{k}",{v:.3f}' for k, v in us.items()]
    print(f"{dtype} {where}: " + " || ".join(line), flush=True)
    print(f"{dtype} {where} pair: " + " | ".join(f"{k} {v:.2f}" for k, v in us.items()), flush=True)


def sweep(dtype: str, shapes, one, csv_name: str) -> None:
    """one(timer, shape, dtype, rows) for each shape, on the GPU, torch.compile's caches dropped between shapes; the
    rows (direction,dtype,shape,plan,us) to $OUT/csv_name."""
    import torch

    from rust_kernels.bench.timing import GpuTimer

    timer = GpuTimer(torch, 15)
    print(torch.cuda.get_device_name(), flush=True)
    rows = ["direction,dtype,shape,plan,us"]
    for shape in shapes:
        reset_compiled(torch)
        one(timer, shape, dtype, rows)
    Path(os.environ.get("OUT", "."), csv_name).write_text("\n".join(rows) + "\n")


def time_training(dtype: str) -> None:
    sweep(dtype, SHAPES, training_shape, f"training_{dtype}.csv")


if __name__ == "__main__":
    mode, arg = sys.argv[1:]
    {"build": lambda a: build(Path(a)), "time": time, "training": time_training}[mode](arg)
