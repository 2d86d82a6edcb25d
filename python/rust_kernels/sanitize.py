"""`python -m rust_kernels sanitize [--out DIR] [--tools T ...] [--family F ...] [--kernel NAME ...]`: every registered
family's plans (or those of some families, or those launching some kernels) under compute-sanitizer's memcheck,
racecheck, synccheck and initcheck, on the GPU.

For each tool the parent runs
    compute-sanitizer --tool T --error-exitcode 1 ... python -m rust_kernels sanitize --child T
whose child cross-checks the cases once (`check.check_one`: small shapes, the sanitizer is slow; every check reads
its outputs back, which synchronises). The parent writes every tool's output to DIR/sanitize.log, prints one line
per tool (the errors counted from the sanitizer's summary), and exits 1 if a tool reports an error or fails, 2 if
compute-sanitizer is not found.

Each family's sanitize shapes exercise every branch of its kernels (each variant, every vectorized mode, empty slices,
H*W that no CTA size divides, several unrolled steps per thread). PyTorch's caching allocator is switched off in the
child, so each array is an allocation of its own that memcheck and initcheck see (PyTorch still rounds sizes up to 512
bytes: an overrun inside that slack goes unseen, but the host emulator's checked mode catches any out-of-bounds access
exactly).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rust_kernels import check, registry
from rust_kernels.dtypes import DTYPES
from rust_kernels.progress import Progress
from rust_kernels.registry import Family, Plan

Shape = tuple[int, ...]


def _by_accumulation(key: str) -> tuple[str, ...]:
    """What shared memory and barriers depend on: the accumulation types, and whether parameters differ from D."""
    dtypes = key.split("-")
    return (*(DTYPES[d].acc for d in dtypes), str(len(set(dtypes))))


def _by_storage(key: str) -> tuple[int, ...]:
    """What addresses depend on: the storage sizes of the activations and the parameters (f16 moves like bf16)."""
    return tuple(DTYPES[d].size for d in key.split("-"))


# Tool: (its options, which of a family's dtype keys it runs, how many of the family's sanitize shapes). memcheck
# runs every dtype key, so that every catalogue instance runs under it; initcheck one key per storage class;
# racecheck and synccheck one per accumulation class, racecheck (the slowest) on the first two shapes only (they
# hold every plan).
TOOLS: dict[str, tuple[tuple[str, ...], Callable[[str], object] | None, int | None]] = {
    "memcheck": ((), None, None),
    "racecheck": (("--racecheck-report", "all"), _by_accumulation, 2),
    "synccheck": ((), _by_accumulation, None),
    "initcheck": ((), _by_storage, None),
}


def tool_dtypes(tool: str, keys: tuple[str, ...]) -> list[str]:
    """The dtype keys `tool` runs: every key, or the first of each class its rule tells apart."""
    rule = TOOLS[tool][1]
    if rule is None:
        return list(keys)
    first: dict[object, str] = {}
    for key in keys:
        first.setdefault(rule(key), key)
    return list(first.values())


# API errors are not kernel errors, and cuda-python probes the driver with calls that fail by design; the target's
# start (imports) is bounded by --timeout instead of the sanitizer's 10 s connection timeout.
COMMON_OPTIONS = ("--error-exitcode", "1", "--report-api-errors", "no", "--launch-timeout", "0")
FALLBACK = Path("/usr/local/cuda/bin/compute-sanitizer")
NOT_FOUND = (
    "compute-sanitizer not found: not on PATH, not in $CUDA_HOME/bin, not at {fallback}. It comes with the CUDA "
    "toolkit: put its bin directory on PATH."
)


def cases(tool: str, families: list[Family] | None = None, kernels: list[str] | None = None,
          part: tuple[int, int] = (1, 1)) -> list[tuple[Family, Plan, Shape]]:  # fmt: skip
    """The (family, plan, shape) cases a tool's child runs: every plan of every CTA size (exhaustive plans); with
    `kernels`, those launching a kernel of one of these names only; shard `part` = (K, N) of them (check.shard)."""
    shapes = TOOLS[tool][2]
    out = []
    for family in families or registry.families():
        for shape in family.sanitize_shapes[:shapes]:
            for dtype in tool_dtypes(tool, family.dtypes):
                plans = family.plans("cuda", shape, dtype, exhaustive=True)
                out += [(family, plan, shape) for plan in plans if kernels is None or check.launches(plan, kernels)]
    return check.shard(out, *part)


def find_sanitizer() -> Path | None:
    """compute-sanitizer on PATH, in $CUDA_HOME/bin, or at FALLBACK."""
    found = shutil.which("compute-sanitizer")
    if found:
        return Path(found)
    candidates = [Path(os.environ["CUDA_HOME"]) / "bin" / "compute-sanitizer"] if os.environ.get("CUDA_HOME") else []
    return next((p for p in [*candidates, FALLBACK] if p.is_file() and os.access(p, os.X_OK)), None)


@dataclass(frozen=True)
class Summary:
    errors: int | None  # None: no summary line (the sanitizer did not finish)
    warnings: int = 0  # racecheck's hazards of warning level
    kernels: tuple[str, ...] = ()  # the entry points its reports name, the most named first


# A report's device location: "at <entry point>+0x<offset>" (memcheck's frames, racecheck's accesses).
REPORTED_AT = re.compile(r"^=========.* at (\w+)\+0x[0-9a-f]+", re.MULTILINE)


def summary(output: str) -> Summary:
    """The counts in a sanitizer run's output: racecheck's "RACECHECK SUMMARY: N hazards displayed (E errors, W
    warnings)" where present, else the last "ERROR SUMMARY: N errors"; and the entry points its reports name."""
    kernels = tuple(name for name, _ in collections.Counter(REPORTED_AT.findall(output)).most_common())
    race = re.findall(r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?, (\d+) warnings?\)", output)
    if race:
        errors, warnings = race[-1]
        return Summary(int(errors), int(warnings), kernels)
    found = re.findall(r"ERROR SUMMARY: (\d+) errors?", output)
    return Summary(int(found[-1]) if found else None, kernels=kernels)


@dataclass(frozen=True)
class ToolRun:
    tool: str
    returncode: int | None  # None: timed out
    summary: Summary
    seconds: float
    ran: str  # the child's last line ("N cases run, M failed"), if it got that far

    @property
    def clean(self) -> bool:
        return self.returncode == 0 and self.summary.errors == 0

    def line(self) -> str:
        s = self.summary
        counts = "no summary" if s.errors is None else f"{s.errors} errors"
        if s.warnings:
            counts += f", {s.warnings} warnings"
        state = "timed out" if self.returncode is None else f"exit {self.returncode}"
        verdict = "clean" if self.clean else "FAILED"
        ran = self.ran or "the child never finished"
        named = f"; reported in {', '.join(s.kernels)}" if s.kernels else ""
        return f"{self.tool:<10} {verdict}: {counts}, {state}, {self.seconds:.0f} s ({ran}){named}"


CHILD_DONE = re.compile(r"^sanitize child: .*$", re.MULTILINE)


def run_tool(sanitizer: Path, tool: str, log: Path, timeout: float, families: list[str] | None = None,
             kernels: list[str] | None = None, part: tuple[int, int] = (1, 1)) -> ToolRun:  # fmt: skip
    """Runs one tool over the child, appending its output to `log`."""
    command = [str(sanitizer), "--tool", tool, *COMMON_OPTIONS, *TOOLS[tool][0],
               sys.executable, "-m", "rust_kernels", "sanitize", "--child", tool]  # fmt: skip
    if families:
        command += ["--family", *families]
    if kernels:
        command += ["--kernel", *kernels]
    if part != (1, 1):
        command += ["--shard", "/".join(map(str, part))]
    # Every array an allocation of its own (no caching allocator sub-allocating from big blocks).
    child = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "RUST_KERNELS_QUIET": "1"}  # set for the child, not read here
    env = os.environ | child
    with log.open("a") as out:
        out.write(f"\n===== {tool}: {' '.join(command)}\n")
        out.flush()
        start = log.stat().st_size
        begin = time.perf_counter()
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            returncode: int | None = child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)  # the sanitizer and the Python child under it
            child.wait()
            returncode = None
        seconds = time.perf_counter() - begin
        ending = f"timed out after {timeout:.0f} s" if returncode is None else f"exit {returncode}"
        out.write(f"===== {tool}: {ending}\n")
    with log.open() as f:
        f.seek(start)
        output = f.read()
    done = CHILD_DONE.findall(output)
    ran = done[-1].removeprefix("sanitize child: ") if done else ""
    return ToolRun(tool, returncode, summary(output), seconds, ran)


def child(tool: str, families: list[Family] | None, kernels: list[str] | None = None,
          part: tuple[int, int] = (1, 1)) -> int:  # fmt: skip
    """Under the sanitizer: every case of `tool` once on the GPU. Exits 1 if a check fails or a launch errs."""
    from rust_kernels import driver

    try:  # no caching allocator for CuPy either, where it is the array library
        import torch  # noqa: F401
    except ImportError:
        import cupy

        cupy.cuda.set_allocator(None)
    todo = cases(tool, families, kernels, part)
    failed = 0
    with Progress(f"sanitize {tool}", len(todo)) as progress:
        for family, plan, shape in todo:
            progress.advance(f"{plan.label} {shape}")
            result = check.check_one(family, plan, shape, "cuda")
            if not result.passed:
                failed += 1
                progress.write(f"FAIL {family.name}: {plan.label} {shape}: {result.error or check.figures(result)}")
    driver.check(driver.driver_module().cuCtxSynchronize(), "synchronizing at the end")
    print(f"sanitize child: {len(todo)} cases run, {failed} failed", flush=True)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rust_kernels sanitize", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("sanitize-out"), help="directory of sanitize.log")
    parser.add_argument("--tools", nargs="+", choices=list(TOOLS), default=list(TOOLS))
    parser.add_argument("--family", nargs="+", help="only these families (default: all)")
    parser.add_argument("--kernel", nargs="+", metavar="NAME", help="only the plans launching a kernel of one of "
                        "these names (kernel authors: the kernel just added)")  # fmt: skip
    parser.add_argument(
        "--shard",
        type=check.shard_option,
        default=(1, 1),
        metavar="K/N",
        help="only part K of N of each tool's cases (as check's): a long run split over several",
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per tool (default 300)")
    parser.add_argument("--child", choices=list(TOOLS), help=argparse.SUPPRESS)  # the run under the sanitizer
    options = parser.parse_args(argv)
    selected = [registry.family(name) for name in options.family] if options.family else None
    if options.kernel and (unknown := check.unknown_kernels(options.kernel)):
        parser.error(unknown)
    if options.child:
        return child(options.child, selected, options.kernel, options.shard)
    sanitizer = find_sanitizer()
    if sanitizer is None:
        print(f"error: {NOT_FOUND.format(fallback=FALLBACK)}", file=sys.stderr)
        return 2
    todo = {tool: cases(tool, selected, options.kernel, options.shard) for tool in options.tools}
    if options.kernel and (empty := [tool for tool, found in todo.items() if not found]):
        print(f"error: {', '.join(empty)}: no case launches {', '.join(options.kernel)}", file=sys.stderr)
        return 2
    options.out.mkdir(parents=True, exist_ok=True)
    log = options.out / "sanitize.log"  # appended to: runs of single tools gather in one log
    with log.open("a") as out:
        out.write(f"\n##### {time.strftime('%Y-%m-%d %H:%M:%S')}: {sanitizer} on {', '.join(options.tools)}\n")
    runs = []
    for tool in options.tools:
        print(f"{tool}: {len(todo[tool])} cases under {sanitizer} ...", flush=True)
        runs.append(run_tool(sanitizer, tool, log, options.timeout, options.family, options.kernel, options.shard))
        print(runs[-1].line(), flush=True)
    clean = all(r.clean for r in runs)
    print(f"{'clean' if clean else 'FAILED'}: {sum(r.clean for r in runs)} of {len(runs)} tools clean; log: {log}")
    return 0 if clean else 1
