"""`python -m rust_kernels tune`: the autotuner (rust_kernels.tuning) run ahead of time over a shape suite, on the GPU.

Each benchmarked family's op is called once per shape and dtype on the family's seeded inputs (its `ours` call,
and `ours_atomic` where it has one), so every candidate plan of every key is timed into the tuning cache;
`--export FILE` then writes this GPU's entries as a table the package can ship (python/rust_kernels/tables/).
Each case's entry names go to a journal beside the entries (JOURNAL): a later run of the same code skips a case while
they all have an entry, without building its inputs, so a run cut short by --budget resumes where it stopped (--force:
none skipped). A journal written by other code (generation) is not used: a case may have new candidates there.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from pathlib import Path

from rust_kernels import builder, resources, tuning
from rust_kernels import cache as kcache
from rust_kernels.bench import baselines, parse_shape, suite, unavailable
from rust_kernels.bench.ops import device_tensors, reset_compiled
from rust_kernels.bench.report import Shape
from rust_kernels.errors import RustKernelsError
from rust_kernels.progress import Progress

CALLS = ("ours", "ours_atomic")  # the columns that run our ops
JOURNAL = "tune-cases.json.gz"  # in the GPU's tuning directory: case -> the entry names its calls consulted


def parser() -> argparse.ArgumentParser:
    tuned = [b.name for b in baselines.baselines() if b.suite]
    p = argparse.ArgumentParser(prog="python -m rust_kernels tune", description=__doc__.split("\n")[0])
    p.add_argument("--op", nargs="+", choices=tuned, default=tuned, metavar="NAME", help=f"families: {tuned}")
    p.add_argument("--shapes", default="suite", metavar="suite|FILE", help="the families' shape suite (default), "
                   "or a file of shapes, one BxCxHxW per line")  # fmt: skip
    p.add_argument("--dtype", nargs="+", default=["f32", "bf16-f32"], help="dtype keys (default: f32 bf16-f32)")
    p.add_argument("--activation", nargs="+", metavar="NAME", help="the activations the families that fuse one "
                   "are tuned with, each its own case (default: the one each is registered with; a key of another is "
                   "timed at first use)")  # fmt: skip
    p.add_argument("--force", action="store_true", help="time every candidate again (default: only those the cache "
                   "and the shipped table have no time for)")  # fmt: skip
    p.add_argument("--budget", type=float, default=0.0, metavar="SECONDS", help="seconds; past them no case begins "
                   "and the table is still exported (0: no limit)")  # fmt: skip
    p.add_argument("--export", type=Path, metavar="FILE", help="then write this GPU's tuning entries to "
                   "FILE (gzipped where it ends in .gz, as python/rust_kernels/tables/ holds them)")  # fmt: skip
    return p


def shapes_of(option: str, family: baselines.Baseline) -> list[Shape]:
    if option == "suite":
        if family.suite is None:
            raise RustKernelsError(f"{family.name} names no shape suite: give --shapes FILE")
        return suite.shapes(family.suite)
    lines = Path(option).read_text().split()
    return [parse_shape(line) for line in lines]


def main(argv: list[str] | None = None) -> int:
    options = parser().parse_args(argv)
    attached = tuning.profiler()
    why = f"a CUDA profiler is attached ({attached} is set): run it outside the profiler" if attached else unavailable()
    if why is not None:
        print(f"error: tune cannot run: {why}", file=sys.stderr)
        return 2
    tuning.use("force" if options.force else "on")
    import torch

    chosen = [baselines.baseline(name) for name in options.op]
    if options.activation:  # a family that fuses one, once per activation (named for it)
        chosen = [baselines.with_activation(b, a) for b in chosen for a in options.activation]
    families = list({f.name: f for f in chosen}.values())  # one that fuses none, once
    # shape by shape in suite.spread's order: a run cut short by --budget has every family and dtype on the same
    # shapes, spread over the suite; within a shape dtype by dtype, so that families sharing inputs follow each other
    indexed = [(i, f, s, d) for d in options.dtype for f in families if d in f.dtypes
               for i, s in enumerate(shapes_of(options.shapes, f))]  # fmt: skip
    cases = suite.by_spread(indexed)
    failed = skipped = 0
    deadline = time.perf_counter() + options.budget if options.budget > 0 else float("inf")
    held: tuple[tuple[str, Shape, str], dict] | None = None  # the last case's inputs: the next may share them
    info = tuning.gpu(torch.cuda.current_device())
    journal_path, code = tuning.directory(info) / JOURNAL, generation(info.arch)
    journal = {} if options.force else read_journal(journal_path, code)
    try:
        with Progress("tune", len(cases)) as progress:
            for number, (family, shape, dtype) in enumerate(cases):
                if time.perf_counter() >= deadline:
                    print(f"\ntune: over its time budget (--budget): {len(cases) - number} of {len(cases)} cases "
                          "not begun")  # fmt: skip
                    break
                progress.advance(f"{family.name} {'x'.join(map(str, shape))} {dtype}")
                case = json.dumps([family.name, list(shape), dtype])
                if not options.force and tuning.served(info, journal.get(case, ())):
                    skipped += 1
                    continue
                reset_compiled(torch)
                try:
                    inputs = (family.family, shape, dtype)  # the same family's inputs (values only move the timings)
                    if held is None or held[0] != inputs:
                        held = None
                        torch.cuda.empty_cache()
                        held = (inputs, device_tensors(family, shape, dtype))
                    calls = family.bench_calls(held[1])
                    with tuning.recording() as names:
                        for name in CALLS:
                            if name in calls:
                                calls[name]()
                        torch.cuda.synchronize()
                    journal[case] = names
                except Exception as err:
                    failed += 1
                    held = None
                    print(f"\n{family.name} {shape} {dtype}: {type(err).__name__}: {err}", file=sys.stderr)
    finally:
        write_journal(journal_path, journal, code)
    if skipped:
        print(f"tune: {skipped} cases skipped: a run before timed every candidate they consult ({journal_path})")
    print(summary(tuning.timed))
    if tuning.issued_directly:
        print(f"tune: {tuning.issued_directly} repetitions could not be captured into graphs and were issued one "
              "launch at a time: their times hold host time")  # fmt: skip
    if options.export is not None:
        info = tuning.gpu(torch.cuda.current_device())
        table = {"gpu": info.name, "sms": info.sms, "entries": tuning.entries(info)}
        options.export.parent.mkdir(parents=True, exist_ok=True)
        write_table(options.export, table)
        print(f"wrote {len(table['entries'])} entries for {info.name} ({info.sms} SMs) to {options.export}")
    return 1 if failed else 0


def generation(arch: str) -> str:
    """A digest of what decides a case's candidates and their entries' names besides the case: the package's Python
    (which plans, their labels) and what the kernels' source keys hash (specs, templates, device crates). A case's
    journaled names stay served when a candidate is added or a kernel changes, so only the same code may skip it."""
    specs = sorted(p for p in resources.codegen().rglob("*") if p.is_file())
    files = [*sorted(resources.PACKAGE.rglob("*.py")), *specs]
    digest = [f"{p.name}:{kcache.sha256(p.read_bytes())}" for p in files]
    return kcache.sha256("\n".join([builder.tree_digest(arch), *digest]).encode())


def read_journal(path: Path, code: str) -> dict[str, list[str]]:
    """The journal's cases and their entry names: empty where there is none, it cannot be read, or other code
    (`code`: generation()) wrote it."""
    try:
        journal = json.loads(gzip.decompress(path.read_bytes()))
    except (OSError, ValueError):
        return {}
    return journal["cases"] if isinstance(journal, dict) and journal.get("generation") == code else {}


def write_journal(path: Path, journal: dict[str, list[str]], code: str) -> None:
    """Writes the journal atomically; where it cannot be written, a later run only walks its cases again."""
    record = {"generation": code, "cases": journal}
    try:
        kcache.write_atomic(path, gzip.compress(json.dumps(record, sort_keys=True).encode(), mtime=0))
    except OSError as err:
        print(f"tune: the journal was not saved ({err.strerror}): {path}", file=sys.stderr)


def write_table(path: Path, table: dict) -> None:
    """A tuning table as the package ships it: sorted JSON, gzipped (a few MB of JSON) without a timestamp where the
    name ends in .gz, so the same entries give the same bytes."""
    text = (json.dumps(table, indent=0, sort_keys=True) + "\n").encode()
    path.write_bytes(gzip.compress(text, mtime=0) if path.name.endswith(".gz") else text)


def summary(timed: list[tuning.Timed]) -> str:
    """How much the measured choice gains over the rule's plan (the first candidate) on the keys timed here."""
    if not timed:
        return "tune: nothing timed (every key already had its entries)"
    gains = [t.rule_us / t.best_us for t in timed if t.rule_us and t.best_us]
    changed = sum(1 for t in timed if t.winner != t.rule)
    return (f"tune: {len(timed)} keys timed; the rule's plan lost on {changed}; rule / best time: median "
            f"{statistics.median(gains):.3f}x, max {max(gains):.3f}x")  # fmt: skip
