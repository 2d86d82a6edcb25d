"""The package's exceptions. Argument errors are ValueErrors (TypeErrors for the wrong kind of object) so callers
can catch them the usual way; every message names the argument and what was expected."""


class RustKernelsError(Exception):
    """Base of every error raised by rust_kernels."""


class ArgumentError(RustKernelsError, ValueError):
    """A kernel argument, launch configuration or op input is not what the kernel's schema expects."""


class ArgumentTypeError(RustKernelsError, TypeError):
    """A kernel argument is the wrong kind of object (for example a list where an array is expected)."""


class SpecError(RustKernelsError, ValueError):
    """A kernel spec (codegen/specs/*.toml) is malformed; refused at generation."""


class ConfigError(RustKernelsError, ValueError):
    """A RUST_KERNELS_* environment variable has a bad value; the message names it and what to fix."""


class ToolchainMissing(RustKernelsError):
    """No usable Rust-to-PTX toolchain (or CUDA tool) was found; the message says how to install one."""


class BuildError(RustKernelsError):
    """cargo/rustc (or ptxas) failed; the message shows the generated file and line."""


class CacheError(RustKernelsError):
    """A cache entry is missing or corrupt and cannot be rebuilt here."""


class KernelUnavailable(CacheError):
    """A kernel is neither prebuilt, nor in the cache, nor buildable here (no toolchain): a fact about this machine
    now, not about the kernel (the autotuner does not keep it)."""


class LaunchError(RustKernelsError):
    """The driver or the host emulator reported an error for a launch."""
