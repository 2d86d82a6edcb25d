"""`python -m rust_kernels <command>`:
run       the main job: build every catalogue kernel, validate its PTX with ptxas, cross-check on the GPU if
          there is one, else on the host emulator, and say what could not be done
build     render and build kernels to PTX (+ cubin) into the cache
check     cross-check kernels against the reference (--backend cuda|host)
bench     time the op against PyTorch and the same-traffic bound, and launch and load overheads, on the GPU
          (python -m rust_kernels bench --help)
generate  write generated Rust: --host-catalogue PATH (used by the host extension's build script)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rust_kernels import codegen, config
from rust_kernels.errors import RustKernelsError
from rust_kernels.kernels import instances


def _build_all(arch: str | None, export: Path | None = None) -> None:
    """Builds every catalogue instance; where no Rust toolchain exists, checks that a carried cache holds them."""
    from rust_kernels import cache
    from rust_kernels.builder import cached_entry
    from rust_kernels.errors import ToolchainMissing
    from rust_kernels.toolchain import find_ptxas, find_toolchain

    try:
        find_toolchain()
        verb = "built"
    except ToolchainMissing as missing:
        print(f"No Rust toolchain here ({missing}); using the kernels already in the cache.")
        verb = "found in the cache"
    kernels = instances()
    entries = []
    for number, kernel in enumerate(kernels, 1):
        entry = cached_entry(kernel, arch)
        entries.append(entry)
        cubins = sorted(p.name for p in entry.path.glob("*.cubin")) or ["no cubin"]
        print(f"[{number}/{len(kernels)}] {kernel.id}: {entry.path} ({', '.join(cubins)})", flush=True)
    validated = all(any(e.path.glob("*.cubin")) for e in entries)
    ptxas = "validated by ptxas (cubins beside it)" if validated else f"not all validated (ptxas: {find_ptxas()})"
    print(f"{len(kernels)} kernels {verb}; PTX {ptxas}")
    if export is not None:
        cache.export(entries, export)
        print(f"exported {len(entries)} entries to {export} (use it with RUST_KERNELS_CACHE_DIR={export})")


def _check(backend: str) -> int:
    from rust_kernels import check

    results = check.run(backend)
    return 0 if results and all(r.passed for r in results) else 1


def _run(arch: str | None) -> int:
    from rust_kernels.cuda import gpu_available
    from rust_kernels.host import host_available

    _build_all(arch)
    gpu, why_not = gpu_available()
    if gpu:
        return _check("cuda")
    print(f"No GPU here ({why_not}): the PTX was built and validated, but nothing was launched on a GPU.")
    host, why_no_host = host_available()
    if not host:
        print(f"The host emulator is not available either ({why_no_host}): no kernel was executed.")
        return 1
    print("Running the same kernel source on the CPU in the host emulator instead:")
    return _check("host")


def _arch(value: str) -> str:
    if not config.is_arch(value):
        raise argparse.ArgumentTypeError(f"expected {config.ARCH_FORMAT}, got {value!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    """Runs a command; exit status 0 on success, 1 when checks failed, 2 for an error (one line on stderr, no
    traceback: every RustKernelsError names what to fix)."""
    try:
        return _main(argv)
    except RustKernelsError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rust_kernels", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "build"):
        sub = commands.add_parser(name)
        sub.add_argument("--arch", type=_arch, help="target GPU architecture (default: $RUST_KERNELS_ARCH or sm_90)")
    commands.choices["build"].add_argument(
        "--export", type=Path, help="also copy the built entries into this directory, a cache to carry elsewhere"
    )
    commands.add_parser("bench", add_help=False)  # its own options: rust_kernels.bench.main parses them
    check = commands.add_parser("check")
    check.add_argument("--backend", choices=("cuda", "host"), default="cuda")
    generate = commands.add_parser("generate")
    generate.add_argument("--host-catalogue", type=Path, required=True, help="write the host catalogue here")
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"]:
        from rust_kernels import bench

        return bench.main(argv[1:])
    options = parser.parse_args(argv)

    if options.command == "run":
        return _run(options.arch)
    if options.command == "build":
        _build_all(options.arch, options.export)
        return 0
    if options.command == "check":
        return _check(options.backend)
    options.host_catalogue.write_text(codegen.host_catalogue(instances()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
