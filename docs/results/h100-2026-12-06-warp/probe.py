"""The warp kernels (training mode, NCHW, a warp per channel held in registers) on the suite's small-channel shapes:
each direction's candidate plans timed interleaved (the warp kernel among them since this change), then the forward
+ backward pair of the rule before (the best plan of another kind where the tuner would have picked it, and the rule's),
the warp pair, torch eager, torch.compile of the same maths and the 8-pass copy; the warp kernels' outputs checked
against the rule's plan (a one-off probe, from the repository root; reuses ../h100-2026-12-06-hw1-fused/probe.py's
helpers). `time` ran while the warp kernels were candidates up to 1 024 values (UNITS to 32); its shapes past 256
values (512 for rows under a sector) have none now and are skipped.

`rule DTYPE`: every suite shape whose rule now takes the warp kernels, the forward + backward pair of the rule
before (the warp kernels' thresholds at 0) and now, alone and with a ReLU fused, against torch eager, torch.compile
(on every third shape with the ReLU) and the 8-pass copy (rule_DTYPE.csv).

    python probe.py build DEST       # here: every candidate's sm_90 kernel (and the rules'), into DEST to carry
    python probe.py time DTYPE       # on the GPU (RUST_KERNELS_CACHE_DIR=DEST, RUST_KERNELS_TUNING=off)
    python probe.py rule DTYPE       # likewise
    python probe.py sanitize DEST    # here: the sm_90 kernels of every sanitizer case launching a warp kernel; then on
                                     # the GPU: python -m rust_kernels sanitize --kernel <the four warp kernels>
"""

import importlib.util
import os
import sys
from pathlib import Path

from rust_kernels import builder, cache, ops
from rust_kernels.bench import suite
from rust_kernels.bench.baselines.batch_norm import EPS, Training
from rust_kernels.bench.ops import device_tensors, reset_compiled
from rust_kernels.families.batch_norm import common, training
from rust_kernels.runtime import Placement

_spec = importlib.util.spec_from_file_location(
    "hw1_fused_probe", Path(__file__).resolve().parents[1] / "h100-2026-12-06-hw1-fused" / "probe.py"
)
hw1 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hw1)

SHAPES = [(1, 128, 7, 7), (1, 1024, 7, 7), (1, 2048, 7, 7), (1, 384, 8, 8), (1, 64, 14, 14), (1, 208, 14, 14),
          (1, 1024, 14, 14), (1, 192, 17, 17), (1, 32, 28, 28), (1, 256, 28, 28), (1, 512, 28, 28),
          (128, 2560, 2, 2), (64, 1280, 3, 3), (32, 2560, 5, 5)]  # fmt: skip
DTYPES = ("f32", "bf16-f32")
PLACEMENT = Placement(16, 132)


def kind(plan) -> str:
    """hw1.kind, the warp kernels apart."""
    return "nchw-warp" if isinstance(plan.kernel, tuple(training.WARP.values())) else hw1.kind(plan)


def plans(shape, dtype):
    """Per direction the NCHW training op's candidates (the rule's first)."""
    return {
        which: op.candidates(problem, PLACEMENT) for which, (op, problem) in hw1.training_problems(shape, dtype).items()
    }


def rule_shapes() -> list[tuple[int, ...]]:
    """The suite's shapes whose forward rule (f32) takes the warp kernels."""
    return [
        s
        for s in suite.shapes("batch_norm_2d")
        if kind(training.plan("forward", s, "f32", "f32", 16, 132, False)) == "nchw-warp"
    ]


def rules(shape, dtype, activation):
    """{(which, "before" or "now"): the rule's plan}: before with the warp kernels' thresholds at 0."""
    storage, param = common.split_key(dtype)
    args = (shape, storage, param, PLACEMENT.alignment, PLACEMENT.sms, False, activation)
    out = {(w, "now"): training.plan(w, *args) for w in ("forward", "backward")}
    kept = training.WARP_RULE_VALUES, training.WARP_ROWS_VALUES
    training.WARP_RULE_VALUES = training.WARP_ROWS_VALUES = 0
    training.plan.cache_clear()
    out.update({(w, "before"): training.plan(w, *args) for w in ("forward", "backward")})
    training.WARP_RULE_VALUES, training.WARP_ROWS_VALUES = kept
    training.plan.cache_clear()
    return out


def build(dest: Path) -> None:
    kernels = {launch.kernel.id: launch.kernel for shape in SHAPES for dtype in DTYPES
               for candidates in plans(shape, dtype).values() for plan in candidates
               for launch in plan.launches}  # fmt: skip
    kernels.update((launch.kernel.id, launch.kernel) for shape in rule_shapes() for dtype in DTYPES
                   for activation in (0, training.ACTIVATIONS["relu"])
                   for plan in rules(shape, dtype, activation).values() for launch in plan.launches)  # fmt: skip
    cache.export(builder.cached_entries([(k, "sm_90") for k in kernels.values()], builder.default_jobs()), dest)
    print(f"{len(kernels)} kernels in {dest}")


def one_shape(timer, shape, dtype, rows) -> None:
    compare(timer, shape, dtype, rows, plans, kind, "nchw-warp")


def compare(timer, shape, dtype, rows, plans_of, kind_of, new: str) -> None:
    """One shape: per direction every candidate of `plans_of(shape, dtype)` that the device runs, timed interleaved
    (the rows), the `new` kind's (of `kind_of`) outputs against the rule's; then the forward + backward pair of the
    rule, of the best plan of another kind and of the best `new` one, torch eager, torch.compile and the bound. The
    block kernels' probe (../h100-2026-12-06-block/probe.py) calls it too."""
    family, t, fwd, bwd = hw1.training_calls(shape, dtype)
    where = "x".join(map(str, shape))
    name = new.removeprefix("nchw-")
    chosen, line = {}, []
    for which, every in plans_of(shape, dtype).items():
        make = fwd if which == "forward" else bwd
        candidates = [p for p in every if hw1.runs(make(p))]
        outputs = (lambda out: out[:3]) if which == "forward" else (lambda out: out)  # y, save_mean, save_invstd
        want = outputs(make(candidates[0])())
        news = [p for p in candidates if kind_of(p) == new]
        if not news:  # past the candidates' values since they were narrowed (the README)
            print(f"{dtype} {where}: no {name} candidate", flush=True)
            return
        worst = max(((a.float() - b.float()).abs() / (b.float().abs() + 1e-3)).max().item()
                    for p in news for a, b in zip(outputs(make(p)()), want, strict=True))  # fmt: skip
        us = timer.medians_us({hw1.label(p): make(p) for p in candidates})
        rows += [f'{which},{dtype},{where},"{k}",{v:.3f}' for k, v in us.items()]
        by_kind = {}
        for p in candidates:
            by_kind.setdefault(kind_of(p), []).append((us[hw1.label(p)], hw1.label(p), p))
        others = [e for k, v in by_kind.items() if k != new for e in v]
        chosen[which] = (candidates[0], min(others)[2], min(by_kind[new])[2])
        kinds = " | ".join(f"{k} {min(v)[0]:.2f}" for k, v in sorted(by_kind.items()))
        line.append(f"{which}: rule {us[hw1.label(candidates[0])]:.2f} ({kind_of(candidates[0])}) | {kinds} | best "
                    f"{name} {min(by_kind[new])[1]} | {name} vs rule's outputs {worst:.1e}")  # fmt: skip
    refs = family.bench_calls(t)

    def pair(i):
        f, b = chosen["forward"][i], chosen["backward"][i]
        return lambda: (fwd(f)(), bwd(b)())

    us = timer.medians_us({"rule": pair(0), "best_other": pair(1), name: pair(2),
                           **{k: refs[k] for k in ("torch", "compile", "bound")}})  # fmt: skip
    hw1.report_pairs(rows, dtype, where, line, us)


def time(dtype: str) -> None:
    hw1.sweep(dtype, SHAPES, one_shape, f"warp_{dtype}.csv")


def rule(dtype: str) -> None:
    import torch

    from rust_kernels.bench.timing import GpuTimer

    timer = GpuTimer(torch, 15)
    print(torch.cuda.get_device_name(), flush=True)
    rows = ["activation,dtype,shape,plan,us"]
    for i, shape in enumerate(rule_shapes()):
        for act in (None, "relu"):
            reset_compiled(torch)
            family = Training(channels_last=False, activation=act)
            t = device_tensors(family, shape, dtype)
            x, weight, bias, mean, var = (t[n] for n in ("x", "weight", "bias", "running_mean", "running_var"))
            dy = torch.randn_like(x)
            plans_of = rules(shape, dtype, training.ACTIVATIONS[act] if act else 0)

            def pair(when, x=x, weight=weight, bias=bias, mean=mean, var=var, dy=dy, act=act, plans_of=plans_of):
                f, b = plans_of["forward", when], plans_of["backward", when]
                if act is None:
                    _, m, s = ops.batch_norm_2d_forward(x, weight, bias, mean, var, True, 0.1, EPS, plan=f)
                    return ops.batch_norm_2d_backward(dy, x, weight, mean, var, m, s, True, EPS, True, plan=b)
                _, m, s = ops.batch_norm_2d_act_forward(x, weight, bias, mean, var, 0.1, EPS, act, plan=f)
                return ops.batch_norm_2d_act_backward(dy, x, weight, bias, m, s, EPS, act, plan=b)

            before, now = pair("before"), pair("now")
            worst = max(((a.float() - b.float()).abs() / (b.float().abs() + 1e-3)).max().item()
                        for a, b in zip(now, before, strict=True))  # fmt: skip
            refs = family.bench_calls(t)
            wanted = ("torch", "compile", "bound") if act is None or i % 3 == 0 else ("torch", "bound")
            us = timer.medians_us({"before": lambda: pair("before"), "now": lambda: pair("now"),
                                   **{k: refs[k] for k in wanted}})  # fmt: skip
            where = "x".join(map(str, shape))
            rows += [f'{act or "none"},{dtype},{where},"{k}",{v:.3f}' for k, v in us.items()]
            print(f"{dtype} {act or 'none'} {where}: " + " | ".join(f"{k} {v:.2f}" for k, v in us.items())
                  + f" | now vs before {worst:.1e}", flush=True)  # fmt: skip
    Path(os.environ.get("OUT", "."), f"rule_{dtype}.csv").write_text("\n".join(rows) + "\n")


def sanitize_build(dest: Path) -> None:
    from rust_kernels import sanitize

    names = [k.spec.name for k in training.WARP.values()]
    cases = [plan for tool in sanitize.TOOLS for _, plan, _ in sanitize.cases(tool, None, names)]
    kernels = {launch.kernel.id: launch.kernel for plan in cases for launch in plan.launches}
    cache.export(builder.cached_entries([(k, "sm_90") for k in kernels.values()], builder.default_jobs()), dest)
    print(f"{len(kernels)} kernels in {dest}")


if __name__ == "__main__":
    mode, arg = sys.argv[1:]
    {"build": lambda a: build(Path(a)), "time": time, "rule": rule, "sanitize": lambda a: sanitize_build(Path(a))}[
        mode
    ](arg)
