"""The public authoring API, in the shape of cuda.core and CuPy's RawKernel:

    program = rust_kernels.Program("my_kernels/")     # a directory of specs (*.toml) and their templates
    kernel = program.kernel("rms_norm_forward", block=256, dtype="f32")     # a descriptor: one instance
    code = rust_kernels.compile(kernel)                # ObjectCode: PTX + cubin, content-hash cached
    fn = code.get_kernel(device=0)                     # loaded; fn.launch(grid, block, args, stream=...)
    fn = rust_kernels.compile(kernel, target="host").get_kernel()   # the same source in the CPU emulator

A spec's template is Jinja2 (plain Rust is a valid template); it sees the shared templates (reductions) too. Builds
go through the same cache, checks and toolchain as the package's own kernels.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rust_kernels import builder
from rust_kernels import cache as kcache
from rust_kernels.errors import ArgumentError
from rust_kernels.kernels import Kernel, instances, kernel_classes
from rust_kernels.spec import class_name, load_specs

if TYPE_CHECKING:
    from rust_kernels.cuda import CudaKernel
    from rust_kernels.host import HostKernel

TARGETS = ("ptx", "host")


class Program:
    """The kernels of one directory of specs: a descriptor class per spec (by kernel name or class name)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory).resolve()
        self.classes = kernel_classes(load_specs(self.directory))

    def __getitem__(self, name: str) -> type[Kernel]:
        if not isinstance(name, str):
            raise ArgumentError(f"name: expected a kernel name (a str), got {name!r}")
        cls = self.classes.get(name) or self.classes.get(class_name(name))
        if cls is None:
            known = sorted(c.spec.name for c in self.classes.values())
            raise ArgumentError(f"name: no kernel {name!r} in {self.directory} (its kernels: {known})")
        return cls

    def kernel(self, name: str, *consts: int, dtype: str = "f32", **named: int) -> Kernel:
        """One instance of kernel `name`: its dtype and consts (positionally in declaration order, or by name)."""
        return self[name](*consts, dtype=dtype, **named)

    def instances(self, dtypes: tuple[str, ...] | None = None) -> list[Kernel]:
        return instances(self.classes.values(), dtypes)

    def __repr__(self) -> str:
        return f"Program({str(self.directory)!r}: {', '.join(c.spec.name for c in self.classes.values())})"


@dataclass(frozen=True)
class ObjectCode:
    """A built kernel instance: PTX and cubin for a GPU arch, or the host emulator's library."""

    kernel: Kernel
    target: str  # "ptx" or "host"
    arch: str  # the GPU arch, or "host"
    entry: kcache.Entry

    @property
    def path(self) -> Path:
        return self.entry.path

    @property
    def ptx(self) -> str:
        if self.target != "ptx":
            raise ArgumentError(f"ptx: {self.kernel.id} was compiled for the host emulator, not to PTX")
        return self.entry.file("kernel.ptx").read_text()

    def cubin(self) -> bytes | None:
        """The cubin for `arch`, where ptxas was available at build time."""
        path = self.entry.file(f"kernel.{self.arch}.cubin")
        return path.read_bytes() if path.is_file() else None

    def get_kernel(self, device: int = 0, *, checked: bool = True) -> CudaKernel | HostKernel:
        """The launchable kernel: loaded on GPU `device`, or in the host emulator (`checked`: bounds-checked)."""
        if self.target == "host":
            from rust_kernels.host import HostKernel

            return HostKernel(self.kernel, checked=checked, library=self.entry.file(builder.HOST_LIBRARY))
        from rust_kernels.cuda import CudaKernel

        return CudaKernel(self.kernel, device, self.entry)


def compile(kernel: Kernel, target: str = "ptx", arch: str | None = None) -> ObjectCode:
    """Builds (or finds in the cache) `kernel` for `target`: "ptx" at GPU `arch` (default sm_90 or
    $RUST_KERNELS_ARCH), or "host" for the CPU emulator."""
    if not isinstance(kernel, Kernel):
        raise ArgumentError(f"kernel: expected a kernel descriptor (Program.kernel(...)), got {type(kernel).__name__}")
    if target not in TARGETS:
        raise ArgumentError(f"target: expected one of {list(TARGETS)}, got {target!r}")
    if target == "ptx" and arch == builder.HOST:
        raise ArgumentError("arch: 'host' is not a GPU arch; the emulator is a target: compile(kernel, target='host')")
    where = builder.HOST if target == "host" else builder.resolve_target(arch)
    return ObjectCode(kernel, target, where, builder.cached_entry(kernel, where))
