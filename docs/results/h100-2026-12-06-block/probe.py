"""The block kernels (training mode, NCHW, a CTA per channel held in registers) on the suite's mid-sized channels
(129 to 4 096 values: batch 1 at 14x14 to 56x56, batch 32 at 7x7 and 8x8, ...): each direction's candidate plans
timed interleaved, then the forward + backward pair of the best plan of another kind (what the tuner picked before),
the best block pair, the rule's, torch eager, torch.compile of the same maths and the 8-pass copy; the block kernels'
outputs checked against the rule's plan (from the repository root; reuses ../h100-2026-12-06-hw1-fused/probe.py's
helpers).

    python probe.py build DEST      # here: the sm_90 kernels of every candidate on SHAPES and on the suite shapes
                                    # where the block kernels are candidates (shapes.txt, the three NCHW training
                                    # ops), and of every check and sanitizer case launching one, into DEST to carry
    python probe.py time DTYPE      # on the GPU (RUST_KERNELS_CACHE_DIR=DEST, RUST_KERNELS_TUNING=off,
                                    # RUST_KERNELS_BLOCK=1: the candidates with the block kernels)
    python probe.py ncu DTYPE       # likewise under ncu --profile-from-start off (ncu.sh): per NCU_SHAPES shape
                                    # the rule's pair, each block pair and torch.compile's, once each after warm-up
    python probe.py rule DTYPE      # likewise: every fourth suite shape whose rule takes the block kernels, the
                                    # rule's pair without them (before) and with them, alone and with a ReLU fused,
                                    # against torch eager, torch.compile (on every other shape) and the 8-pass copy
"""

import importlib.util
import sys
from pathlib import Path

from rust_kernels import builder, cache, check, registry, sanitize
from rust_kernels.bench import suite
from rust_kernels.bench.ops import reset_compiled
from rust_kernels.families.batch_norm import common, training

_here = Path(__file__).resolve()


def _sibling(name: str, path: str):
    """A script of another results directory, as a module."""
    spec = importlib.util.spec_from_file_location(name, _here.parents[1] / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hw1 = _sibling("hw1_fused_probe", "h100-2026-12-06-hw1-fused/probe.py")
keys = _sibling("warp_tune_keys", "h200-2026-12-06-warp-tune/keys.py")
warp = _sibling("warp_probe", "h100-2026-12-06-warp/probe.py")

SHAPES = [(1, 208, 14, 14), (1, 800, 14, 14), (1, 192, 17, 17), (1, 32, 35, 35), (1, 352, 28, 28), (1, 480, 28, 28),
          (1, 96, 56, 56), (1, 256, 56, 56), (8, 256, 14, 14), (32, 320, 8, 8), (32, 448, 8, 8), (32, 544, 7, 7),
          (32, 672, 7, 7), (32, 2048, 7, 7), (64, 1280, 3, 3), (64, 512, 7, 7)]  # fmt: skip
DTYPES = ("f32", "bf16-f32")
NAMES = [k.spec.name for k in training.BLOCK.values()]


def kind(plan) -> str:
    """hw1.kind, the block and warp kernels apart."""
    if isinstance(plan.kernel, tuple(training.BLOCK.values())):
        return "nchw-block"
    return "nchw-warp" if isinstance(plan.kernel, tuple(training.WARP.values())) else hw1.kind(plan)


def plans(shape, dtype):
    """Per direction the NCHW training op's candidates (the rule's first)."""
    problems = hw1.training_problems(shape, dtype)
    return {which: op.candidates(problem, hw1.PLACEMENT) for which, (op, problem) in problems.items()}


def suite_shapes() -> list[tuple[int, ...]]:
    return [s for s in suite.shapes("batch_norm_2d") if training.block_options(s)]


def build(dest: Path) -> None:
    kernels = {launch.kernel.id: launch.kernel for shape in SHAPES for dtype in DTYPES
               for candidates in plans(shape, dtype).values() for plan in candidates
               for launch in plan.launches}  # fmt: skip
    shapes = suite_shapes()
    _here.with_name("shapes.txt").write_text("\n".join("x".join(map(str, s)) for s in shapes) + "\n")
    kernels.update(keys.kernels_of(shapes, keys.TRAINING))
    kernels.update((launch.kernel.id, launch.kernel) for shape in rule_shapes() for dtype in DTYPES
                   for activation in (0, training.ACTIVATIONS["relu"])
                   for plan in rules(shape, dtype, activation).values() for launch in plan.launches)  # fmt: skip
    # models.sh (RUST_KERNELS_TUNING=off): the rules' plans, with the block kernels and without, on every suite shape
    # at batch 32 (the models' BatchNorm inputs among them), bf16 with f32 parameters, plain and with each activation
    for shape in (s for s in suite.shapes("batch_norm_2d") if s[0] == 32):
        for activation in (0, *training.ACTIVATIONS.values()):
            kernels.update((launch.kernel.id, launch.kernel) for plan in rules(shape, "bf16-f32", activation).values()
                           for launch in plan.launches)  # fmt: skip
    residual = {k: v for k, v in keys.TRAINING.items() if k.startswith("batch_norm_2d_add_relu")}
    kernels.update(keys.kernels_of([s for s in suite.shapes("batch_norm_2d") if s[0] == 32], residual))
    cases = [plan for tool in sanitize.TOOLS for _, plan, _ in sanitize.cases(tool, None, NAMES)]
    cases += [plan for _, plan, _ in check.cases("cuda", registry.families()) if check.launches(plan, NAMES)]
    kernels.update((launch.kernel.id, launch.kernel) for plan in cases for launch in plan.launches)
    cache.export(builder.cached_entries([(k, "sm_90") for k in kernels.values()], builder.default_jobs()), dest)
    print(f"{len(shapes)} suite shapes, {len(kernels)} kernels in {dest}")


def one_shape(timer, shape, dtype, rows) -> None:
    warp.compare(timer, shape, dtype, rows, plans, kind, "nchw-block")


NCU_SHAPES = [(1, 208, 14, 14), (1, 352, 28, 28), (32, 448, 8, 8)]


def profiled(dtype: str) -> None:
    import torch

    for shape in NCU_SHAPES:
        reset_compiled(torch)
        family, t, fwd, bwd = hw1.training_calls(shape, dtype)
        every = plans(shape, dtype)
        pairs = {"rule": (every["forward"][0], every["backward"][0])}
        pairs.update((f"block {i}", (f, b)) for i, (f, b) in enumerate(zip(
            [p for p in every["forward"] if kind(p) == "nchw-block"],
            [p for p in every["backward"] if kind(p) == "nchw-block"], strict=True)))  # fmt: skip
        calls = {k: (lambda f=f, b=b, fwd=fwd, bwd=bwd: (fwd(f)(), bwd(b)())) for k, (f, b) in pairs.items()}
        calls["compile"] = family.bench_calls(t)["compile"]
        for call in calls.values():
            for _ in range(3):
                call()
        torch.cuda.synchronize()
        for name, call in calls.items():
            print(f"{dtype} {'x'.join(map(str, shape))} {name}: {[p.label for p in pairs.get(name, ())]}", flush=True)
            torch.cuda.cudart().cudaProfilerStart()
            call()
            torch.cuda.synchronize()
            torch.cuda.cudart().cudaProfilerStop()


def rule_shapes() -> list[tuple[int, ...]]:
    """Every fourth suite shape whose forward rule (f32) takes the block kernels."""
    shapes = [s for s in suite.shapes("batch_norm_2d")
              if kind(training.plan("forward", s, "f32", "f32", 16, 132, False, 0, True)) == "nchw-block"]  # fmt: skip
    return shapes[::4]


def rules(shape, dtype, activation):
    """{(which, "before" or "now"): the rule's plan}: now with the block kernels (RUST_KERNELS_BLOCK=1), before
    without."""
    storage, param = common.split_key(dtype)
    args = (shape, storage, param, hw1.PLACEMENT.alignment, hw1.PLACEMENT.sms, False, activation)
    return {(w, when): training.plan(w, *args, when == "now") for w in ("forward", "backward")
            for when in ("now", "before")}  # fmt: skip


def rule(dtype: str) -> None:
    """The warp probe's `rule` over this probe's shapes and plans (its module's rule_shapes and rules replaced)."""
    warp.rule_shapes, warp.rules = rule_shapes, rules
    warp.rule(dtype)


def time(dtype: str) -> None:
    hw1.sweep(dtype, SHAPES, one_shape, f"block_{dtype}.csv")


if __name__ == "__main__":
    mode, arg = sys.argv[1:]
    {"build": lambda a: build(Path(a)), "time": time, "ncu": profiled, "rule": rule}[mode](arg)
