"""rust_kernels: GPU kernels written in Rust for the rust-cuda programming model, generated from Python templates,
built to PTX with stock Rust toolchains, launched with cuda-python and cross-checked against references.

    import rust_kernels
    from rust_kernels.kernels import BatchNorm2dNchwBackward
    k = BatchNorm2dNchwBackward(block_hw=256, dtype="f32")
    fn = rust_kernels.compile(k).get_kernel(device=0)        # or compile(k, target="host") for the CPU emulator
    fn.launch(grid, block, args)

    program = rust_kernels.Program("my_kernels/")            # your own specs and templates
    fn = rust_kernels.compile(program.kernel("my_kernel", block=256)).get_kernel()
"""

from rust_kernels.builder import build
from rust_kernels.errors import (
    ArgumentError,
    BuildError,
    CacheError,
    LaunchError,
    RustKernelsError,
    SpecError,
    ToolchainMissing,
)
from rust_kernels.launch import load
from rust_kernels.program import ObjectCode, Program, compile
from rust_kernels.registry import Family, register
from rust_kernels.runtime import Op
from rust_kernels.version import __version__

__all__ = [
    "ArgumentError",
    "BuildError",
    "CacheError",
    "Family",
    "LaunchError",
    "ObjectCode",
    "Op",
    "Program",
    "RustKernelsError",
    "SpecError",
    "ToolchainMissing",
    "__version__",
    "build",
    "compile",
    "load",
    "register",
]
