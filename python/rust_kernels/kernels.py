"""Kernel descriptors, mirroring the original system's generated struct and `Kernel` trait.

One class per spec, named in PascalCase (BatchNorm2dNchwBackward). An instance fixes the dtype and the consts:
`BatchNorm2dNchwBackward(block_hw=256, dtype="f32")` (consts may also be given positionally, in declaration order, as in
the original's `new(block_hw)`); a spec generic in a parameter dtype P takes it too (`BatchNorm2dNchwBackwardSplit(128,
1, 1, dtype="bf16", param_dtype="f32")`: default, D). The package's own kernels (the catalogue) are the specs of every
family directory under codegen/; a user's directory of specs becomes classes the same way (rust_kernels.Program).
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Iterable
from functools import cached_property

import numpy as np

from rust_kernels import codegen, resources
from rust_kernels.dtypes import DTYPES, FloatType
from rust_kernels.errors import ArgumentError
from rust_kernels.spec import FREE, KernelSpec, check_unique, load_specs

MAX_THREADS = 1024  # a CTA's threads on every GPU since compute capability 2.0


class Kernel:
    """One compiled instance of a kernel: its sources, identity and launch signature."""

    spec: KernelSpec

    def __init__(self, *const_values: int, dtype: str = "f32", param_dtype: str | None = None, **named: int) -> None:
        spec = self.spec
        if dtype not in spec.dtypes:
            raise ArgumentError(f"dtype: expected one of {list(spec.dtypes)} for {spec.name}, got {dtype!r}")
        params = spec.params_for(dtype)
        if param_dtype is not None and param_dtype not in params:
            raise ArgumentError(f"param_dtype: expected one of {list(params)} for {spec.name} in {dtype}, "
                                f"got {param_dtype!r}")  # fmt: skip
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
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or not const.accepts(int(value)):
                raise ArgumentError(f"{const.field}: expected {const.describe()}, got {value!r}")
            values[const.field] = int(value)
            setattr(self, const.field, int(value))
        self.dtype = dtype
        self.param_dtype = param_dtype or dtype
        self.const_values = tuple(values[c.field] for c in spec.consts)
        threads = math.prod(self.block_dim)
        if threads > MAX_THREADS:
            shown = " x ".join(f"{d}={self.consts[d]}" if isinstance(d, str) else str(d) for d in spec.block)
            raise ArgumentError(f"block: {spec.name}'s CTA is {shown} = {threads} threads; "
                                f"a CTA holds at most {MAX_THREADS}")  # fmt: skip

    # --- the original's fields -------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def dtype_key(self) -> str:
        """The dtype, or "D-P" where the parameters' dtype differs ("bf16-f32")."""
        return self.dtype if self.param_dtype == self.dtype else f"{self.dtype}-{self.param_dtype}"

    @property
    def id(self) -> str:
        """Readable identifier: name, dtype key and const values joined by "__" (not the cache key)."""
        return "__".join([self.name, self.dtype_key, *map(str, self.const_values)])

    @cached_property
    def consts(self) -> dict[str, int]:
        """The const values by name."""
        return {c.name: v for c, v in zip(self.spec.consts, self.const_values, strict=True)}

    @property
    def spec_names(self) -> dict[str, int]:
        """What the spec's expressions (preconditions, register caps) see besides arguments: consts and DSIZE."""
        return self.consts | {"DSIZE": self.dtype_info.size}

    @cached_property
    def kernel_source(self) -> str:
        return codegen.kernel_source(self.spec, self.dtype_key, self.param_dtype, self.consts)

    @cached_property
    def entry_point_source(self) -> str:
        return codegen.entry_point_source(self.spec, self.dtype, self.param_dtype, self.const_values)

    @property
    def source(self) -> str:
        return self.kernel_source + "\n\n" + self.entry_point_source

    def entry_point_name(self) -> str:
        return f"{self.name}_entry_point"

    @cached_property
    def args(self) -> tuple[tuple[str, str], ...]:
        """The launch signature, in ABI order: (name, Rust type) pairs with the dtype substituted."""
        return tuple((a.name, a.concrete(self.dtype, self.param_dtype)) for a in self.spec.args)

    @cached_property
    def source_sha256(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()

    # --- launch geometry, from the spec ----------------------------------------------------------------------
    @property
    def dtype_info(self) -> FloatType:
        return DTYPES[self.dtype]

    @cached_property
    def block_dim(self) -> tuple[int, int, int]:
        """The CTA shape the kernel is written for."""
        x, y, z = (self.consts[d] if isinstance(d, str) else d for d in self.spec.block)
        return (x, y, z)

    def grid_dim(self, scalars: dict[str, int]) -> tuple[int | None, int | None, int | None]:
        """The grid the kernel expects for these scalar argument values (None: any size, the caller's choice)."""
        x, y, z = (None if d == FREE else scalars[d] if isinstance(d, str) else d for d in self.spec.grid)
        return (x, y, z)

    @cached_property
    def shared_mem_bytes(self) -> int:
        """Dynamic shared memory the kernel needs (the launch default)."""
        warps = self.block_dim[0] * self.block_dim[1] * self.block_dim[2] // 32
        return self.spec.shared_accumulators_per_warp * warps * self.dtype_info.acc_size

    def __repr__(self) -> str:
        consts = ", ".join(f"{c.field}={v}" for c, v in zip(self.spec.consts, self.const_values, strict=True))
        param = "" if self.param_dtype == self.dtype else f", param_dtype={self.param_dtype!r}"
        return f"{type(self).__name__}({consts}, dtype={self.dtype!r}{param})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Kernel) and (other.spec, other.dtype_key, other.const_values) == (
            self.spec,
            self.dtype_key,
            self.const_values,
        )

    def __hash__(self) -> int:
        return hash((self.spec.name, self.dtype_key, self.const_values))


def kernel_class(spec: KernelSpec) -> type[Kernel]:
    return type(spec.class_name, (Kernel,), {"spec": spec, "__doc__": spec.doc, "__module__": __name__})


def kernel_classes(specs: Iterable[KernelSpec]) -> dict[str, type[Kernel]]:
    """One descriptor class per spec, by class name."""
    specs = tuple(specs)
    check_unique(specs)
    return {spec.class_name: kernel_class(spec) for spec in specs}


def family_directories() -> list:
    """The package's kernel families: every directory under codegen/ holding specs."""
    return sorted(d for d in resources.codegen().iterdir() if d.is_dir() and any(d.glob("*.toml")))


def instances(classes: Iterable[type[Kernel]] | None = None, dtypes: tuple[str, ...] | None = None) -> list[Kernel]:
    """Every instance of the given kernel classes (default: the catalogue): each dtype, parameter dtype and const
    combination that can launch (one failing a precondition over its consts alone, such as a mode of one memory
    format only, is left out)."""
    out = []
    for cls in CATALOGUE.values() if classes is None else classes:
        spec = cls.spec
        for dtype in spec.dtypes if dtypes is None else [d for d in dtypes if d in spec.dtypes]:
            for param in spec.params_for(dtype):
                for values in itertools.product(*(c.values() for c in spec.consts)):
                    kernel = cls(*values, dtype=dtype, param_dtype=param)
                    if spec.impossible(kernel.spec_names) is None:
                        out.append(kernel)
    return out


CATALOGUE: dict[str, type[Kernel]] = kernel_classes(s for d in family_directories() for s in load_specs(d))
globals().update(CATALOGUE)
__all__ = ["CATALOGUE", "Kernel", "instances", "kernel_classes", *CATALOGUE]
