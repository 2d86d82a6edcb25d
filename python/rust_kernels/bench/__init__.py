"""`python -m rust_kernels bench`: how fast each registered op is next to PyTorch, torch.compile and the memory bound,
what one call costs on the host next to PyTorch's, and what one launch costs on the host through each launch path.

Op benchmark (`ops`). For each family of the registry, each of its bench shapes and each dtype, in one process on the
same tensors (the family's seeded inputs): the columns of its baseline's `bench_calls` (rust_kernels.bench.baselines) —
our op ("ours"; for families with modes also e.g. "ours_atomic", partials combined with float atomics instead of in a
fixed order), PyTorch's native op ("torch"), torch.compile of the same maths ("compile") and "bound", a call that moves
the same bytes (e.g. read two tensors, write one) and so is the practical bound. Each repetition flushes L2 (256 MB
written), then queues a GPU spin (`torch.cuda._sleep`) longer than the call's host time, so the timed region between the
two CUDA events holds GPU work only; warm-up calls (loading, compiling) stay outside; the median of the repetitions is
reported. GB/s counts the baseline's `moved_bytes`; the fraction of the bound is bound µs / column µs; speedups are
torch µs / ours µs and compile µs / ours µs. A column that raises is n/a, its reason printed once.

Host cost. On each family's smallest shape, every column is called back to back (after warm-up) without
synchronising, and the host wall time divided by the number of calls: what a call costs the host to issue, the
figure that decides whether a small op inside a real program is faster than PyTorch's. Reported as µs per call and
ours over torch.

Launch benchmark (`launch`). Host time per launch of one loaded kernel on a tiny problem, from the bare driver call
through ctypes (the floor) to our checked launch, cuda.core and CuPy; CUDA-graph replay against direct launches; and
the time to load the module from its cubin against JIT-compiling its PTX.

Model benchmark (`models`, with --models, instead of the two above): torchvision models (ResNet-50, MobileNetV2 by
default) fine-tuned with BatchNorm frozen (or training it, or in inference: --bn), torch's BN against ours
(rust_kernels.torch.convert) in one process on identical weights and inputs, per model x --batch x --dtype (f32;
bf16 through torch.autocast) x --modes (eager; graph, the whole step captured by torch.cuda.graph): step time,
gradients (inference: the logits) compared, BN's share of the step's CUDA time (torch.profiler). See `models`.

Modules: `timing` (the timers), `ops`, `launch` and `models` (what is measured), `report` (results, CSV, tables, PNG,
log). Files written to --out: bench.csv, host.csv, bench.png (when matplotlib is installed: the extra
rust_kernels[plot]), launch.csv, bench.log; with --models: models.csv, models_kernels.csv (every profiled kernel),
models.log.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rust_kernels import driver
from rust_kernels.bench import baselines, launch, models, ops, report, suite
from rust_kernels.bench.report import Shape
from rust_kernels.dtypes import DTYPES

DEFAULT_DTYPES = ["f32", "bf16"]
MIN_REPS = 20


def _at_least(least: int) -> Callable[[str], int]:
    """An integer option's type; argparse names the option in front of the message."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"expected at least {least}, got {value}")
        return value

    return parse


def parse_shape(text: str) -> Shape:
    """A shape from the command line: 32x256x56x56 (or 32,256,56,56) -> (32, 256, 56, 56)."""
    try:
        shape = tuple(int(part) for part in text.replace(",", "x").split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a shape like 32x256x56x56, got {text!r}") from None
    if not shape or min(shape) < 1:
        raise argparse.ArgumentTypeError(f"expected positive dimensions, got {text!r}")
    return shape


def parser() -> argparse.ArgumentParser:
    names = [b.name for b in baselines.baselines()]
    p = argparse.ArgumentParser(
        prog="python -m rust_kernels bench",
        description="Time the registered ops against PyTorch, torch.compile and the memory bound, their host cost "
        "against PyTorch's, and the cost of a launch.",
    )
    p.add_argument("--family", nargs="+", choices=names, default=names, metavar="NAME", help=f"families: {names}")
    keys = list(dict.fromkeys([*DTYPES, *(d for b in baselines.baselines() for d in b.dtypes)]))
    mixed = "bf16-f32: bf16 activations with f32 parameters, as under autocast"
    p.add_argument("--dtype", nargs="+", choices=keys, default=DEFAULT_DTYPES, help=f"dtypes to time ({mixed})")
    p.add_argument("--shapes", nargs="+", type=parse_shape, help="shapes (BxCxHxW) instead of each family's own")
    p.add_argument("--suite", action="store_true", help="every family that names a shape suite, over it (the "
                   "BatchNorm2d ops: the inputs of eight torchvision models at batch 1, 32, 128, and extremes); also "
                   "writes bench_suite.csv")  # fmt: skip
    p.add_argument("--compile-every", type=_at_least(0), default=1, metavar="K",
                   help="time torch.compile on every K-th shape only (it compiles each shape afresh, seconds each; "
                   "the other shapes' column is n/a); 0: on none")  # fmt: skip
    p.add_argument(
        "--reps", type=_at_least(MIN_REPS), default=30, help=f"timed repetitions per call (at least {MIN_REPS})"
    )
    p.add_argument("--host-calls", type=_at_least(1), default=ops.HOST_CALLS, help="calls per round of the host cost")
    p.add_argument("--out", type=Path, default=Path("."), help="directory for the CSV files, the PNG and the log")
    p.add_argument("--skip-ops", action="store_true", help="skip the op benchmark")
    p.add_argument("--skip-launch", action="store_true", help="skip the launch benchmark")
    p.add_argument("--budget", type=float, metavar="SECONDS", help="seconds; past them, no op case, model cell or "
                   f"profile begins, and the files are written (0: no limit; default: none for the op benchmark, "
                   f"{models.BUDGET_S:.0f} for the models)")  # fmt: skip
    m = p.add_argument_group(
        "model benchmark", "--models runs it instead of the op and launch benchmarks (run those in a separate call)"
    )
    m.add_argument("--models", nargs="*", metavar="NAME", help="torchvision models training (BN frozen, or --bn "
                   "train) or in inference (--bn eval), torch's BN against ours (bare: "
                   f"{' '.join(models.MODELS)})")  # fmt: skip
    m.add_argument("--batch", nargs="+", type=_at_least(1), default=list(models.BATCHES), help="batch sizes")
    m.add_argument("--modes", nargs="+", choices=models.ALL_MODES, default=list(models.MODES),
                   help="eager steps, the whole step captured as a CUDA graph and replayed, and/or the model through "
                   "torch.compile")  # fmt: skip
    m.add_argument(
        "--bn",
        choices=models.BN_MODES,
        default="frozen",
        help="BN frozen (fine-tuning: eval-mode BN in a training step), training (batch statistics), or eval "
        "(inference: the model in eval mode, the forward alone under no_grad)",
    )
    m.add_argument("--memory-format", choices=models.MEMORY_FORMATS, default=models.MEMORY_FORMATS[0],
                   help="the memory format of the model and its inputs")  # fmt: skip
    m.add_argument("--fuse", action="store_true", help="ours: convert(model, fuse=True), each BatchNorm2d that "
                   "feeds only a ReLU, SiLU, ReLU6 or Hardswish, or only an add whose sum feeds only a ReLU, fused "
                   "with it (torch.fx)")  # fmt: skip
    m.add_argument("--steps", type=_at_least(5), default=models.STEPS, help="timed steps per side and cell")
    m.add_argument("--warmup", type=_at_least(1), default=models.WARMUP, help="untimed steps per side before timing")
    m.add_argument("--profile-steps", type=_at_least(0), default=models.PROFILE_STEPS,
                   help="eager steps per side under torch.profiler for BN's share (0: no profile)")  # fmt: skip
    m.add_argument("--no-tf32", action="store_true", help="f32 convolutions and matmuls without TF32 (torch's "
                   "default lets cuDNN use TF32)")  # fmt: skip
    return p


def unavailable() -> str | None:
    """Why the benchmark cannot run here, or None."""
    ok, why = driver.gpu_available()
    if not ok:
        return f"no GPU: {why}"
    try:
        import torch
    except ImportError as err:
        return f"PyTorch is not installed ({err}); it provides the tensors, the baselines and the timer"
    if not torch.cuda.is_available():
        return "PyTorch sees no CUDA device"
    return None


def _ops(torch: object, options: argparse.Namespace) -> int:
    families = [baselines.baseline(name) for name in options.family]
    out: Path = options.out
    deadline = time.perf_counter() + options.budget if options.budget else math.inf
    if options.suite:
        done = ops.Run()
        for name in dict.fromkeys(f.suite for f in families if f.suite):
            part = [f for f in families if f.suite == name]
            shapes = suite.shapes(name)
            ran = ops.run(torch, part, options.dtype, options.reps, shapes, options.host_calls, options.compile_every,
                          deadline)  # fmt: skip
            done.results += ran.results
            done.hosts += ran.hosts
            done.failures.merge(ran.failures)
        report.write_suite_csv(done.results, out / "bench_suite.csv")
        print(f"wrote {out / 'bench_suite.csv'}", flush=True)
        _png(report.write_suite_png, done.results, out / "bench_suite.png")
    else:
        done = ops.run(torch, families, options.dtype, options.reps, options.shapes, options.host_calls,
                       options.compile_every, deadline)  # fmt: skip
    report.print_table(done.results)
    report.print_host(done.hosts, options.host_calls)
    report.print_summary(report.summarize(done.results, done.hosts))
    for line in done.failures.lines():
        print(f"n/a: {line}")
    report.write_csv(done.results, out / "bench.csv")
    report.write_host_csv(done.hosts, out / "host.csv")
    print(f"wrote {out / 'bench.csv'} and {out / 'host.csv'}", flush=True)
    if not options.suite:  # a bar per shape: too many for a suite (its plot is bench_suite.png)
        _png(report.write_png, done.results, out / "bench.png")
    if done.failures.failed("ours") or done.failures.failed("setup"):
        print("bench: our op could not be measured in some cases (see above)", flush=True)
        return 1
    return 0


def _png(write: Callable[[list[report.OpResult], Path], None], results: list[report.OpResult], path: Path) -> None:
    if not results:
        return
    try:
        write(results, path)
        print(f"wrote {path}", flush=True)
    except ImportError as err:
        print(f"{path.name} not written: matplotlib is missing ({err})", flush=True)


def _launch(torch: object, out: Path) -> None:
    rows = launch.run(torch)
    report.print_launch(rows)
    report.write_launch_csv(rows, out / "launch.csv")
    print(f"wrote {out / 'launch.csv'}", flush=True)


def model_plan(options: argparse.Namespace) -> models.Plan:
    return models.Plan(
        models=options.models or list(models.MODELS),
        batches=options.batch,
        dtypes=[d for d in options.dtype if d in models.DTYPES],
        modes=options.modes,
        steps=options.steps,
        warmup=options.warmup,
        profile_steps=options.profile_steps,
        budget_s=models.BUDGET_S if options.budget is None else max(0.0, options.budget),
        bn=options.bn,
        memory_format=options.memory_format,
        fuse=options.fuse,
    )


def _models(torch: Any, options: argparse.Namespace) -> int:
    out: Path = options.out
    if options.no_tf32:
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
    print(f"cudnn.allow_tf32 {cudnn.allow_tf32}, cuda.matmul.allow_tf32 {matmul.allow_tf32}, "
          f"cudnn.benchmark {cudnn.benchmark}, cudnn.deterministic {cudnn.deterministic}", flush=True)  # fmt: skip
    skipped = [d for d in options.dtype if d not in models.DTYPES]
    if skipped:
        print(f"models: not benchmarked in {skipped} (the model benchmark's dtypes: {list(models.DTYPES)})")
    plan = model_plan(options)
    cells = len(plan.cells())
    print(f"model benchmark: {cells} cells ({' '.join(plan.models)}; B {plan.batches}; {' '.join(plan.dtypes)}; "
          f"{' '.join(plan.modes)}; BN {plan.bn}; {plan.memory_format}), "
          f"{plan.steps} timed steps per side after {plan.warmup}, "
          f"profile {plan.profile_steps} steps, budget {plan.budget_s:.0f} s", flush=True)  # fmt: skip
    results = models.run(torch, plan)
    models.print_table(results)
    models.print_summary(results)
    models.print_kernels(results)
    models.write_csv(results, out / "models.csv")
    models.write_kernels_csv(results, out / "models_kernels.csv")
    print(f"wrote {out / 'models.csv'} and {out / 'models_kernels.csv'}", flush=True)
    if any(r.ms["ours"] is None for r in results):
        print("bench: ours could not be timed in some cells (see above)", flush=True)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """Runs the benchmark; 0 when done, 1 when our op could not be measured somewhere, 2 when it cannot run here."""
    options = parser().parse_args(argv)
    why = unavailable() or (models.unavailable() if options.models is not None else None)
    if why is not None:
        print(f"error: bench cannot run: {why}", file=sys.stderr)
        return 2
    import torch

    options.out.mkdir(parents=True, exist_ok=True)
    if options.models is not None:
        with report.logged(options.out / "models.log"):
            print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
            print(f"bench {' '.join(sys.argv[1:] if argv is None else argv)}", flush=True)
            return _models(torch, options)
    status = 0
    with report.logged(options.out / "bench.log"):
        print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
        print(f"bench {' '.join(sys.argv[1:] if argv is None else argv)}", flush=True)
        if not options.skip_ops:
            status = _ops(torch, options)
        if not options.skip_launch:
            _launch(torch, options.out)
    return status
