"""The channels_last training directions on mid-sized tensors (x of 1.5-25 MB), where the two-launch plans' fixed
latency holds them at 0.43-0.63 of the bound in bf16 (docs/results/h100-2026-12-06-suite/): every autotuner candidate
of each direction timed (GPU time, L2 flushed, interleaved, median), the new cooperative kernels
(batch_norm_2d_cooperative_*_channels_last: the persistent kernels' grid::sync exchange, each CTA reading its rows a
second time from L2) among them, each cooperative plan checked against float64 first (check.check_one: a grid the GPU
cannot hold at once is refused and reported). The pair of the best plans set against PyTorch eager, torch.compile of
the same maths (every third shape) and the 8-pass bound, in one process. Every plan's median goes to plans.csv.

    python probe.py build DEST   # here: every candidate's sm_90 kernel, into DEST to carry
    python probe.py time         # on the GPU (RUST_KERNELS_CACHE_DIR=DEST, RUST_KERNELS_TUNING=off)
    python probe.py sanitize     # under compute-sanitizer: each cooperative plan of SANITIZE, checked once
"""

import os
import sys
from pathlib import Path

from rust_kernels import ArgumentError, builder, cache, check, ops, registry
from rust_kernels.bench.baselines.batch_norm import Training
from rust_kernels.families.batch_norm import common, training

# The suite's weak channels_last training class on an H100 (0.43-0.63 of the bound in bf16) and ResNet-50's
# channels_last layers at batch 32 up to 25 MB of bf16 x.
SHAPES = [(32, 24, 56, 56), (32, 384, 28, 28), (128, 480, 14, 14), (32, 512, 28, 28), (32, 1024, 14, 14),
          (32, 64, 56, 56), (32, 128, 28, 28), (32, 256, 14, 14), (32, 2048, 7, 7), (32, 200, 14, 14),
          (1, 256, 56, 56), (32, 544, 7, 7), (128, 672, 7, 7), (32, 864, 14, 14), (128, 992, 7, 7),
          (32, 256, 28, 28)]  # fmt: skip
KEYS = ("bf16-f32", "f32")
SANITIZE = [(32, 544, 7, 7), (32, 200, 14, 14)]  # small: the sanitizer is slow
SMS = 132  # H100 SXM and H200
EPS = 1e-5
WHICH = ("forward", "backward")


def candidates(which: str, shape, key: str) -> tuple:
    """The direction's autotuner candidates (block kernels and persistent ones on), the rule's plan first."""
    storage, param = common.split_key(key)
    return training._candidates(which, shape, storage, param, 16, SMS, True, 0, True, True)


def cooperative(plan) -> bool:
    return isinstance(plan.kernel, tuple(training.COOPERATIVE.values()))


def build(dest: Path) -> None:
    kernels = {launch.kernel.id: launch.kernel for shape in SHAPES for key in KEYS for which in WHICH
               for plan in candidates(which, shape, key) for launch in plan.launches}  # fmt: skip
    cache.export(builder.cached_entries([(k, "sm_90") for k in kernels.values()], builder.default_jobs()), dest)
    print(f"{len(kernels)} kernels in {dest}")


def label(plan) -> str:
    return " + ".join(f"{p.kernel.name.removeprefix('batch_norm_2d_')}:{p.grid}:{dict(p.values)}"
                      for p in plan.launches)  # fmt: skip


def tensors(shape, key: str):
    import torch

    dtype = {"bf16-f32": torch.bfloat16, "f32": torch.float32}[key]
    x = (torch.randn(shape, device="cuda") * 2 + 1).to(dtype).contiguous(memory_format=torch.channels_last)
    c = shape[1]
    w, b = torch.rand(c, device="cuda") + 0.5, torch.randn(c, device="cuda")
    return x, torch.randn_like(x), w, b, torch.zeros(c, device="cuda"), torch.ones(c, device="cuda")


def call(which: str, plan, arrays, saved):
    """One direction with `plan`: the forward on (x, weight, bias, running statistics), the backward on dy and the
    forward's `saved` statistics."""
    x, dy, w, b, rm, rv = arrays
    if which == "forward":
        return lambda: ops.batch_norm_2d_forward(x, w, b, rm, rv, True, 0.1, EPS, plan=plan)
    return lambda: ops.batch_norm_2d_backward(dy, x, w, rm, rv, saved[1], saved[2], True, EPS, plan=plan)


def runs(plan, which: str, arrays, saved) -> bool:
    """Whether the GPU runs the plan: the persistent and cooperative grids must be resident at once."""
    try:
        call(which, plan, arrays, saved)()
    except ArgumentError as err:
        print(f"refused {label(plan)}: {err}", flush=True)
        return False
    return True


def checked(shape, key: str, families) -> list:
    """The cooperative plans of both directions that the GPU runs, each checked against float64; failures printed."""
    runnable = []
    for which, family in zip(WHICH, families, strict=True):
        for plan in filter(cooperative, candidates(which, shape, key)):
            result = check.check_one(family, plan, shape, "cuda")
            if "is cooperative" in result.error:
                print(f"refused (not resident) {label(plan)}", flush=True)
            elif not result.passed:
                print(f"FAILED {label(plan)} {shape} {key}: {result}", flush=True)
                raise SystemExit(1)
            else:
                runnable.append(plan)
    return runnable


def sanitize() -> None:
    families = [registry.family(f"batch_norm_2d_{w}") for w in WHICH]
    for shape in SANITIZE:
        for key in KEYS:
            print(shape, key, len(checked(shape, key, families)), "cooperative plans ran", flush=True)


def time() -> None:
    import torch

    from rust_kernels.bench.ops import reset_compiled
    from rust_kernels.bench.timing import GpuTimer

    timer = GpuTimer(torch, 15)
    print(torch.cuda.get_device_name(), flush=True)
    families = [registry.family(f"batch_norm_2d_{w}") for w in WHICH]
    bench = Training(True)
    csv = Path(os.environ.get("OUT", "."), "plans.csv")
    csv.write_text("dtype,shape,direction,plan,us\n")
    for n, shape in enumerate(SHAPES):
        for key in KEYS:
            runnable = {label(p) for p in checked(shape, key, families)}
            reset_compiled(torch)
            arrays = tensors(shape, key)
            x, _, w, b, rm, rv = arrays
            saved = ops.batch_norm_2d_forward(x, w, b, rm.clone(), rv.clone(), True, 0.1, EPS)
            timed, kinds = {}, {}
            for which in WHICH:
                for plan in candidates(which, shape, key):
                    name = f"{which} {label(plan)}"
                    if (cooperative(plan) and label(plan) not in runnable) or not runs(plan, which, arrays, saved):
                        continue
                    timed[name] = call(which, plan, arrays, saved)
                    kinds.setdefault(name, (which, "rule" if plan is candidates(which, shape, key)[0] else
                                            "cooperative" if cooperative(plan) else "other"))  # fmt: skip
            calls = bench.bench_calls({"x": x, "weight": w, "bias": b, "running_mean": rm, "running_var": rv})
            timed.update({k: calls[k] for k in ("torch", "bound") + (("compile",) if n % 3 == 0 else ())})
            us = timer.medians_us(timed)
            where = "x".join(map(str, shape))
            with csv.open("a") as f:  # shape by shape: a run cut short keeps what it timed
                f.writelines(f'{key},{where},{kinds.get(k, ("pair",))[0]},"{k}",{v:.3f}\n' for k, v in us.items())

            def best(which: str, kind: str | None = None, us=us, kinds=kinds) -> float:
                return min((v for k, v in us.items() if k in kinds and kinds[k][0] == which
                            and (kind is None or kinds[k][1] == kind)), default=float("nan"))  # fmt: skip

            rule = best("forward", "rule") + best("backward", "rule")
            others = sum(min(best(which, "rule"), best(which, "other")) for which in WHICH)
            tuned = best("forward") + best("backward")
            mb = x.numel() * x.element_size() / 1e6
            print(f"{key:8} {where:<14} {mb:6.2f} MB | fwd rule {best('forward', 'rule'):6.2f} other "
                  f"{best('forward', 'other'):6.2f} coop {best('forward', 'cooperative'):6.2f} | bwd rule "
                  f"{best('backward', 'rule'):6.2f} other {best('backward', 'other'):6.2f} coop "
                  f"{best('backward', 'cooperative'):6.2f} | pair rule {rule:6.2f} best-without {others:6.2f} "
                  f"best {tuned:6.2f} (bound {us['bound'] / tuned:.2f}, was {us['bound'] / others:.2f}) | eager "
                  f"{us['torch']:6.2f} compile {us.get('compile', float('nan')):6.2f} bound {us['bound']:6.2f}",
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    mode, *rest = sys.argv[1:]
    {"build": build, "time": time, "sanitize": sanitize}[mode](*map(Path, rest))
