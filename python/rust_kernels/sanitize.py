"""`python -m rust_kernels sanitize [--out DIR] [--tools T ...]`: every registered family's plans under
compute-sanitizer's memcheck, racecheck, synccheck and initcheck, on the GPU.

For each tool the parent runs
    compute-sanitizer --tool T --error-exitcode 1 ... python -m rust_kernels sanitize --child T
whose child cross-checks the cases once (`check.check_one`: small shapes, the sanitizer is slow; every check reads
its outputs back, which synchronises). The parent writes every tool's output to DIR/sanitize.log, prints one line
per tool (the errors counted from the sanitizer's summary), and exits 1 if a tool reports an error or fails, 2 if
compute-sanitizer is not found.

The shapes exercise every branch: each kernel variant, every vectorized mode, split 1 and > 1 in both deterministic
modes (with CTAs whose slice is empty), the warp kernel with a warp per channel over several CTAs and with one CTA
whose warps stride over the channels, H*W that no CTA size divides, several unrolled steps per thread, and the
forward kernel. PyTorch's caching allocator is switched off in the child, so each array is an allocation of its
own that memcheck and initcheck see (PyTorch still rounds sizes up to 512 bytes: an overrun inside that slack goes
unseen, but the host emulator's checked mode catches any out-of-bounds access exactly).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rust_kernels import check, registry
from rust_kernels.progress import Progress
from rust_kernels.registry import Family, Plan

Shape = tuple[int, ...]

SHAPES: list[Shape] = [
    (2, 3, 5, 8),  # H*W = 40: a multiple of every pack's lanes and of no CTA; split 16 leaves CTAs without units
    (3, 40, 1, 7),  # 40 channels of 21 single elements: the warp kernel over 10 CTAs, and 1 CTA striding
    (4, 2, 31, 33),  # 4 092 single elements per channel: several unrolled steps per thread
    (2, 2, 48, 64),  # H*W = 3 072: several vectorized steps per thread
]
# Tool: (its options, the dtypes it runs, how many of SHAPES). Addresses depend on the storage type's size only
# (f16 moves like bf16): initcheck runs one type of each size; memcheck runs every dtype, so that every catalogue
# instance runs under it. Shared memory and barriers depend on the accumulation type only (f32 for f32, bf16, f16;
# f64 for f64): racecheck and synccheck run one of each, and
# racecheck, the slowest, the first two shapes only (they hold every plan). bf16-f32 runs the mixed-precision
# variants (f32 parameters beside bf16 activations).
TOOLS: dict[str, tuple[tuple[str, ...], tuple[str, ...], int]] = {
    "memcheck": ((), ("f32", "f64", "bf16", "f16", "bf16-f32", "f16-f32"), len(SHAPES)),
    "racecheck": (("--racecheck-report", "all"), ("f32", "f64", "bf16-f32"), 2),
    "synccheck": ((), ("f32", "f64", "bf16-f32"), len(SHAPES)),
    "initcheck": ((), ("f32", "f64", "bf16", "bf16-f32"), len(SHAPES)),
}
# API errors are not kernel errors, and cuda-python probes the driver with calls that fail by design; the target's
# start (imports) is bounded by --timeout instead of the sanitizer's 10 s connection timeout.
COMMON_OPTIONS = ("--error-exitcode", "1", "--report-api-errors", "no", "--launch-timeout", "0")
FALLBACK = Path("/usr/local/cuda/bin/compute-sanitizer")
NOT_FOUND = (
    "compute-sanitizer not found: not on PATH, not in $CUDA_HOME/bin, not at {fallback}. It comes with the CUDA "
    "toolkit: put its bin directory on PATH."
)


def cases(tool: str, families: list[Family] | None = None) -> list[tuple[Family, Plan, Shape]]:
    """The (family, plan, shape) cases a tool's child runs: every plan of every CTA size (plans "every")."""
    _, dtypes, shapes = TOOLS[tool]
    out = []
    for family in families or registry.families():
        for shape in SHAPES[:shapes]:
            for dtype in [d for d in family.dtypes if d in dtypes]:
                out += [(family, plan, shape) for plan in family.plans("every", shape, dtype)]
    return out


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


def summary(output: str) -> Summary:
    """The counts in a sanitizer run's output: racecheck's "RACECHECK SUMMARY: N hazards displayed (E errors, W
    warnings)" where present, else the last "ERROR SUMMARY: N errors"."""
    race = re.findall(r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?, (\d+) warnings?\)", output)
    if race:
        errors, warnings = race[-1]
        return Summary(int(errors), int(warnings))
    found = re.findall(r"ERROR SUMMARY: (\d+) errors?", output)
    return Summary(int(found[-1]) if found else None)


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
        return f"{self.tool:<10} {verdict}: {counts}, {state}, {self.seconds:.0f} s ({ran})"


CHILD_DONE = re.compile(r"^sanitize child: .*$", re.MULTILINE)


def run_tool(sanitizer: Path, tool: str, log: Path, timeout: float, families: list[str] | None = None) -> ToolRun:
    """Runs one tool over the child, appending its output to `log`."""
    command = [str(sanitizer), "--tool", tool, *COMMON_OPTIONS, *TOOLS[tool][0],
               sys.executable, "-m", "rust_kernels", "sanitize", "--child", tool]  # fmt: skip
    if families:
        command += ["--family", *families]
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


def child(tool: str, families: list[Family] | None) -> int:
    """Under the sanitizer: every case of `tool` once on the GPU. Exits 1 if a check fails or a launch errs."""
    from rust_kernels import driver

    try:  # no caching allocator for CuPy either, where it is the array library
        import torch  # noqa: F401
    except ImportError:
        import cupy

        cupy.cuda.set_allocator(None)
    todo = cases(tool, families)
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
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per tool (default 300)")
    parser.add_argument("--child", choices=list(TOOLS), help=argparse.SUPPRESS)  # the run under the sanitizer
    options = parser.parse_args(argv)
    selected = [registry.family(name) for name in options.family] if options.family else None
    if options.child:
        return child(options.child, selected)
    sanitizer = find_sanitizer()
    if sanitizer is None:
        print(f"error: {NOT_FOUND.format(fallback=FALLBACK)}", file=sys.stderr)
        return 2
    options.out.mkdir(parents=True, exist_ok=True)
    log = options.out / "sanitize.log"  # appended to: runs of single tools gather in one log
    with log.open("a") as out:
        out.write(f"\n##### {time.strftime('%Y-%m-%d %H:%M:%S')}: {sanitizer} on {', '.join(options.tools)}\n")
    runs = []
    for tool in options.tools:
        print(f"{tool}: {len(cases(tool, selected))} cases under {sanitizer} ...", flush=True)
        runs.append(run_tool(sanitizer, tool, log, options.timeout, options.family))
        print(runs[-1].line(), flush=True)
    clean = all(r.clean for r in runs)
    print(f"{'clean' if clean else 'FAILED'}: {sum(r.clean for r in runs)} of {len(runs)} tools clean; log: {log}")
    return 0 if clean else 1
