"""rust_kernels: GPU kernels written in Rust for the rust-cuda programming model, generated from Python templates,
built to PTX with stock Rust toolchains, launched with cuda-python and cross-checked against references.

    from rust_kernels.kernels import BatchNorm2dNchwBackward
    import rust_kernels
    k = BatchNorm2dNchwBackward(block_hw=256, dtype="f32")
    ptx = rust_kernels.build(k)                 # cached by content hash
    fn = rust_kernels.load(k, device=0)         # or backend="host" for the CPU emulator
    fn.launch(grid, block, args)
"""

from rust_kernels.builder import build
from rust_kernels.errors import (
    ArgumentError,
    BuildError,
    CacheError,
    LaunchError,
    RustKernelsError,
    ToolchainMissing,
)
from rust_kernels.launch import load
from rust_kernels.version import __version__

__all__ = [
    "ArgumentError",
    "BuildError",
    "CacheError",
    "LaunchError",
    "RustKernelsError",
    "ToolchainMissing",
    "__version__",
    "build",
    "load",
]
