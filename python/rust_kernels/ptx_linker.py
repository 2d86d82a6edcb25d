#!/usr/bin/env python3
"""rustc's linker for nvptx64-nvidia-cuda (link flavor `llbc`), built from LLVM's own tools.

rustc calls ``LINKER --export-symbol SYM ... INPUTS -L DIR ... --target T --target-cpu CPU -o OUT.ptx -O3 [--debug]``.
This links the bitcode of every input (rlib members included), keeps only the exported symbols, optimises and
emits PTX: ``llvm-link`` -> ``opt`` -> ``llc``. ``opt`` internalizes and drops dead code before O3, so O3 sees only
what the kernel uses, not all of core (14 s -> under 1 s per kernel). The LLVM tools come from the directory in
``RUST_KERNELS_LLVM_BIN`` (set by the build, matching rustc's LLVM), or from PATH. The PTX is at least ISA 7.8
(CUDA 11.8, what LLVM emits for sm_90): LLVM's default for older archs (7.0 for sm_80) lacks the bf16 conversions.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path


def parse(argv: list[str]) -> tuple[list[str], list[str], str, str, str]:
    exports: list[str] = []
    inputs: list[str] = []
    out, cpu, opt_level = "", "sm_90", "3"
    it = iter(argv)
    for arg in it:
        if arg == "--export-symbol":
            exports.append(next(it))
        elif arg == "-o":
            out = next(it)
        elif arg == "--target-cpu":
            cpu = next(it)
        elif arg in ("-L", "--target"):
            next(it)
        elif arg.startswith("-O"):
            opt_level = arg[2:] or "3"
        elif arg == "--debug" or arg.startswith("-L"):
            continue
        elif arg.startswith("-"):
            sys.exit(f"ptx_linker: unexpected option {arg!r}")
        else:
            inputs.append(arg)
    if not out:
        sys.exit("ptx_linker: no output file (-o) given")
    return exports, inputs, out, cpu, opt_level


MIN_PTX_ISA = (90, "+ptx78")  # archs below sm_90 get PTX ISA 7.8


def ptx_features(cpu: str) -> list[str]:
    number = int("".join(c for c in cpu if c.isdigit()) or 0)
    return [f"-mattr={MIN_PTX_ISA[1]}"] if number < MIN_PTX_ISA[0] else []


def tool(name: str) -> str:
    directory = os.environ.get("RUST_KERNELS_LLVM_BIN")
    return str(Path(directory) / name) if directory else name


def main(argv: list[str]) -> int:
    exports, inputs, out, cpu, opt_level = parse(argv)
    with tempfile.TemporaryDirectory(prefix="rk-link-") as tmp:
        linked, optimised = Path(tmp, "linked.bc"), Path(tmp, "optimised.bc")
        steps = [
            [tool("llvm-link"), "--ignore-non-bitcode", *inputs, "-o", str(linked)],
            [
                tool("opt"),
                f"--internalize-public-api-list={','.join(exports)}",
                f"--passes=internalize,globaldce,default<O{opt_level}>",
                str(linked),
                "-o",
                str(optimised),
            ],
            [tool("llc"), f"-mcpu={cpu}", *ptx_features(cpu), f"-O{opt_level}", str(optimised), "-o", out],
        ]
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True)
            if done.returncode:
                sys.stderr.write(f"ptx_linker: {' '.join(step)}\n{done.stderr}")
                return done.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
