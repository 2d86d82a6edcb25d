"""The command line, `python -m rust_kernels <command>`: every command below (`<command> --help` for its options).

run       Build every catalogue kernel, validate its PTX with ptxas, and cross-check every family on the GPU, or in
          the host emulator where there is none, saying what could not be done.
build     Build catalogue kernels to PTX (+ cubin) for one or more archs, or for the host emulator, into the cache,
          --jobs at a time (default: one per CPU); --export DIR also copies them to a cache directory to carry,
          --prebuilt into the package for a wheel.
check     Cross-check every family's plans against its float64 reference, on the GPU or (--backend host) in the host
          emulator.
bench     Time the ops against PyTorch, torch.compile and the memory bound, their host cost and launch overheads, on
          the GPU.
sanitize  Run every family's plans under compute-sanitizer's memcheck, racecheck, synccheck and initcheck, on the GPU.
fuzz      Run random cases (shapes, dtypes, eps, alignments, layouts, plans) against the references, on the GPU or in
          the host emulator.
tune      Time every candidate launch plan of the ops over a shape suite on the GPU into the tuning cache (the
          autotuner, ahead of time); --export FILE writes them as a table to ship.

A usage or environment problem is one line, `error: ...` on stderr, and exit status 2; 1 means checks failed.
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
from pathlib import Path

from rust_kernels.errors import RustKernelsError
from rust_kernels.kernels import instances

INTERRUPTED = 130  # `check` stopped by Ctrl-C or SIGTERM, having reported the cases that ran (as a shell codes SIGINT)


def _build_all(archs: list[str], export: Path | None = None, jobs: int = 1) -> int:
    """Builds every catalogue instance for each arch ("host" for the emulator), `jobs` at a time; where no Rust
    toolchain exists, checks that a carried or prebuilt cache holds them. Returns how many entries it has."""
    from rust_kernels import cache, resources
    from rust_kernels.builder import cached_entries
    from rust_kernels.errors import ToolchainMissing
    from rust_kernels.progress import Progress
    from rust_kernels.toolchain import find_ptxas, find_toolchain

    try:
        find_toolchain()
        verb = "built or found in the cache"
    except ToolchainMissing as missing:
        print(f"No Rust toolchain here ({missing}); using the kernels already in the cache or prebuilt.")
        verb = "found in the cache"
    kernels = instances()
    if not kernels:
        raise RustKernelsError(f"the catalogue is empty: no kernel specs under {resources.codegen()}")
    work = [(kernel, arch) for arch in archs for kernel in kernels]
    with Progress("build", len(work)) as progress:
        entries = cached_entries(work, jobs, lambda kernel, arch: progress.advance(f"{kernel.id} ({arch})"))
    gpu = [e for e in entries if e.meta.get("arch") != "host"]
    validated = all(any(e.path.glob("*.cubin")) for e in gpu)
    print(f"{len(entries)} kernel entries {verb} ({len(kernels)} instances x {', '.join(archs)})")
    if gpu:
        print(
            "PTX validated by ptxas (cubins beside it)"
            if validated
            else f"PTX not all validated (ptxas: {find_ptxas()})"
        )
    if export is not None:
        cache.export(entries, export)
        print(f"exported {len(entries)} entries to {export} (use it with RUST_KERNELS_CACHE_DIR={export})")
    return len(entries)


def _check(backend: str, family: list[str] | None = None, kernels: list[str] | None = None,
           part: tuple[int, int] = (1, 1)) -> int:  # fmt: skip
    from rust_kernels import check, registry

    if kernels and (unknown := check.unknown_kernels(kernels)):
        print(f"error: {unknown}", file=sys.stderr)
        return 2
    selected = [registry.family(name) for name in family] if family else None
    where = (lambda plan: check.launches(plan, kernels)) if kernels else None
    # A time limit's SIGTERM (`timeout`, a batch system) interrupts as Ctrl-C does: the cases that ran are reported.
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        results = check.run(backend, selected, sys.stdout, where, part)
    except KeyboardInterrupt:
        return INTERRUPTED
    finally:
        signal.signal(signal.SIGTERM, previous)
    if not results:
        what = f"no case launches {', '.join(kernels)}" if kernels else "no family has cases for this backend"
        print(f"error: no check ran ({what})", file=sys.stderr)
        return 2
    return 0 if all(r.passed for r in results) else 1


def _run(arch: str | None) -> int:
    from rust_kernels.builder import default_arch, default_jobs
    from rust_kernels.driver import gpu_available
    from rust_kernels.host import host_available

    built = _build_all([arch or default_arch()], jobs=default_jobs())
    gpu, why_not = gpu_available()
    if gpu:
        return _check("cuda")
    print(
        f"No GPU here ({why_not}): the {built} PTX entries were built and validated, but nothing was launched on a GPU."
    )
    host, why_no_host = host_available()
    if not host:
        print(f"The host emulator is not available either ({why_no_host}): no kernel was executed.")
        return 1
    print("Running the same kernel source on the CPU in the host emulator instead:")
    return _check("host")


def _arch(value: str) -> str:
    """An --arch value: sm_NN[a], or "host" where the command builds for the emulator."""
    from rust_kernels import config

    if value != "host" and not config.is_arch(value):
        raise argparse.ArgumentTypeError(f"expected {config.ARCH_FORMAT} or host, got {value!r}")
    return value


def _jobs(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number of builds at a time, got {value!r}")
    return int(value)


def _commands() -> dict[str, str]:
    """Each command's description, read from the module docstring's table so that --help and it cannot differ."""
    table = __doc__.split("\n\n")[1]
    return {name: " ".join(text.split()) for name, text in re.findall(r"^(\w+) +(.+(?:\n +.+)*)", table, re.M)}


def main(argv: list[str] | None = None) -> int:
    from rust_kernels.check import shard_option  # by name: `check` below is the subcommand's parser

    summary, *_, epilog = __doc__.split("\n\n")
    parser = argparse.ArgumentParser(prog="python -m rust_kernels", description=summary, epilog=epilog)
    commands = parser.add_subparsers(dest="command", required=True, title="commands", metavar="<command>")
    table = _commands()

    def command(name: str, **options: bool) -> argparse.ArgumentParser:
        return commands.add_parser(name, help=table[name], description=table[name], **options)

    run = command("run")
    run.add_argument("--arch", type=_arch, help="target GPU architecture (default: $RUST_KERNELS_ARCH or sm_90)")
    build = command("build")
    build.add_argument(
        "--arch", type=_arch, nargs="+", help="GPU archs (sm_80 sm_90 sm_100 ...) or host; default sm_90"
    )
    build.add_argument("--export", type=Path, help="also copy the entries into this directory, a cache to carry")
    build.add_argument("--prebuilt", action="store_true", help="also copy them into the package (for a wheel)")
    build.add_argument("--jobs", type=_jobs, help="builds at a time (default: one per CPU)")
    check = command("check")
    check.add_argument("--backend", choices=("cuda", "host"), default="cuda", help="the GPU (default) or the emulator")
    check.add_argument("--family", nargs="+", help="only these families (default: all)")
    check.add_argument("--kernel", nargs="+", metavar="NAME", help="only the plans launching a kernel of one of these "
                       "names (kernel authors: the kernel just added)")  # fmt: skip
    check.add_argument("--shard", type=shard_option, default=(1, 1), metavar="K/N",
                       help="only part K of N of the cases (each part some of every family, dtype and plan): a long "
                       "check split over runs of limited time")  # fmt: skip
    for name in ("bench", "sanitize", "fuzz", "tune"):  # their own modules parse their options (and --help)
        command(name, add_help=False)
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv[:1] == ["bench"]:
            from rust_kernels.bench import main as bench_main

            return bench_main(argv[1:])
        if argv[:1] == ["sanitize"]:
            from rust_kernels.sanitize import main as sanitize_main

            return sanitize_main(argv[1:])
        if argv[:1] == ["fuzz"]:
            from rust_kernels.fuzz import main as fuzz_main

            return fuzz_main(argv[1:])
        if argv[:1] == ["tune"]:
            from rust_kernels.bench.tune import main as tune_main

            return tune_main(argv[1:])
        options = parser.parse_args(argv)
        if options.command == "run":
            return _run(options.arch)
        if options.command == "build":
            from rust_kernels import resources
            from rust_kernels.builder import default_arch, default_jobs

            export = resources.prebuilt() if options.prebuilt else options.export
            _build_all(options.arch or [default_arch()], export, options.jobs or default_jobs())
            return 0
        if options.backend == "cuda":
            from rust_kernels.driver import gpu_available

            usable, why = gpu_available()
            if not usable:
                print(f"error: no GPU to check on ({why}); use --backend host for the CPU emulator", file=sys.stderr)
                return 2
        return _check(options.backend, options.family, options.kernel, options.shard)
    except RustKernelsError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
