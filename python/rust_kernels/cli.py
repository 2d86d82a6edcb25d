"""`python -m rust_kernels <command>`:
  run       the main job: build every catalogue kernel, validate its PTX with ptxas, cross-check on the GPU if
            there is one, else on the host emulator, and say what could not be done
  build     render and build kernels to PTX (+ cubin) into the cache
  check     cross-check kernels against the reference (--backend cuda|host)
  generate  write generated Rust: --host-catalogue PATH (used by the host extension's build script)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rust_kernels import codegen
from rust_kernels.kernels import instances


def _build_all(arch: str | None) -> int:
    from rust_kernels.builder import build
    from rust_kernels.toolchain import find_ptxas

    kernels = instances()
    for number, kernel in enumerate(kernels, 1):
        path = build(kernel, arch)
        print(f"[{number}/{len(kernels)}] {kernel.id}: {path}", flush=True)
    has_ptxas = find_ptxas() is not None
    print(f"built {len(kernels)} kernels; PTX {'validated by ptxas (cubins beside it)' if has_ptxas else 'NOT validated: no ptxas'}")
    return len(kernels)


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rust_kernels", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "build"):
        sub = commands.add_parser(name)
        sub.add_argument("--arch", help="target GPU architecture (default: $RUST_KERNELS_ARCH or sm_90)")
    check = commands.add_parser("check")
    check.add_argument("--backend", choices=("cuda", "host"), default="cuda")
    generate = commands.add_parser("generate")
    generate.add_argument("--host-catalogue", type=Path, required=True, help="write the host catalogue here")
    options = parser.parse_args(argv)

    if options.command == "run":
        return _run(options.arch)
    if options.command == "build":
        _build_all(options.arch)
        return 0
    if options.command == "check":
        return _check(options.backend)
    options.host_catalogue.write_text(codegen.host_catalogue(instances()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
