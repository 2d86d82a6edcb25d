"""Kernel descriptors, mirroring the original system's generated struct and `Kernel` trait.

One class per spec in codegen/specs, named in PascalCase (BatchNorm2dNchwBackward). An instance fixes the dtype
and the consts: `BatchNorm2dNchwBackward(block_hw=256, dtype="f32")` (consts may also be given positionally, in
declaration order, as in the original's `new(block_hw)`).
"""

from __future__ import annotations

import hashlib
import itertools
from functools import cached_property

from rust_kernels import codegen
from rust_kernels.errors import ArgumentError
from rust_kernels.spec import DTYPES, DType, KernelSpec, load_specs


class Kernel:
    """One compiled instance of a kernel: its sources, identity and launch signature."""

    spec: KernelSpec

    def __init__(self, *const_values: int, dtype: str = "f32", **named: int) -> None:
        spec = self.spec
        if dtype not in spec.dtypes:
            raise ArgumentError(f"dtype: expected one of {list(spec.dtypes)} for {spec.name}, got {dtype!r}")
        if len(const_values) > len(spec.consts):
            raise ArgumentError(f"{spec.name} takes {len(spec.consts)} const argument(s), got {len(const_values)}")
        values = dict(zip((c.field for c in spec.consts), const_values, strict=False))
        for key, value in named.items():
            if key not in {c.field for c in spec.consts}:
                raise ArgumentError(f"{key}: not a const of {spec.name} (its consts: {[c.field for c in spec.consts]})")
            if key in values:
                raise ArgumentError(f"{key}: given both positionally and by name")
            values[key] = value
        for const in spec.consts:
            if const.field not in values:
                raise ArgumentError(f"{const.field}: required ({const.doc or const.name}), {const.describe()}")
            value = values[const.field]
            if isinstance(value, bool) or not isinstance(value, int) or not const.accepts(value):
                raise ArgumentError(f"{const.field}: expected {const.describe()}, got {value!r}")
            setattr(self, const.field, value)
        self.dtype = dtype
        self.const_values = tuple(values[c.field] for c in spec.consts)

    # --- the original's fields -------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def id(self) -> str:
        """Readable identifier: name, dtype and const values joined by "__" (not the cache key)."""
        return "__".join([self.name, self.dtype, *map(str, self.const_values)])

    @property
    def kernel_source(self) -> str:
        return codegen.kernel_source(self.spec)

    @cached_property
    def entry_point_source(self) -> str:
        return codegen.entry_point_source(self.spec, self.dtype, self.const_values)

    @property
    def source(self) -> str:
        return self.kernel_source + "\n\n" + self.entry_point_source

    def entry_point_name(self) -> str:
        return f"{self.name}_entry_point"

    @cached_property
    def args(self) -> tuple[tuple[str, str], ...]:
        """The launch signature, in ABI order: (name, Rust type) pairs with the dtype substituted."""
        return tuple((a.name, a.concrete(self.dtype)) for a in self.spec.args)

    @cached_property
    def source_sha256(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()

    def content_hash(self, arch: str | None = None) -> str:
        """SHA-256 of everything that decides the PTX: the cache key (see rust_kernels.builder.content_hash)."""
        from rust_kernels.builder import content_hash

        return content_hash(self, arch)

    # --- launch geometry, from the spec ----------------------------------------------------------------------
    @property
    def dtype_info(self) -> DType:
        return DTYPES[self.dtype]

    @cached_property
    def block_dim(self) -> tuple[int, int, int]:
        """The CTA shape the kernel is written for."""
        consts = {c.name: v for c, v in zip(self.spec.consts, self.const_values, strict=True)}
        x, y, z = (consts[d] if isinstance(d, str) else d for d in self.spec.block)
        return (x, y, z)

    def grid_dim(self, scalars: dict[str, int]) -> tuple[int, int, int]:
        """The grid the kernel expects for these scalar argument values."""
        x, y, z = (scalars[d] if isinstance(d, str) else d for d in self.spec.grid)
        return (x, y, z)

    @cached_property
    def shared_mem_bytes(self) -> int:
        """Dynamic shared memory the kernel needs (the launch default)."""
        warps = self.block_dim[0] * self.block_dim[1] * self.block_dim[2] // 32
        return self.spec.shared_accumulators_per_warp * warps * self.dtype_info.acc_size

    def __repr__(self) -> str:
        consts = ", ".join(f"{c.field}={v}" for c, v in zip(self.spec.consts, self.const_values, strict=True))
        return f"{type(self).__name__}({consts}, dtype={self.dtype!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Kernel) and (other.spec, other.dtype, other.const_values) == (
            self.spec,
            self.dtype,
            self.const_values,
        )

    def __hash__(self) -> int:
        return hash((self.spec.name, self.dtype, self.const_values))


def kernel_class(spec: KernelSpec) -> type[Kernel]:
    return type(spec.class_name, (Kernel,), {"spec": spec, "__doc__": spec.doc, "__module__": __name__})


CATALOGUE: dict[str, type[Kernel]] = {spec.class_name: kernel_class(spec) for spec in load_specs()}
globals().update(CATALOGUE)
__all__ = ["CATALOGUE", "Kernel", "instances", *CATALOGUE]


def instances(dtypes: tuple[str, ...] | None = None) -> list[Kernel]:
    """Every instance of every catalogue kernel: each dtype and each accepted const combination."""
    out = []
    for cls in CATALOGUE.values():
        spec = cls.spec
        for dtype in spec.dtypes if dtypes is None else [d for d in dtypes if d in spec.dtypes]:
            for values in itertools.product(*(c.values() for c in spec.consts)):
                out.append(cls(*values, dtype=dtype))
    return out
