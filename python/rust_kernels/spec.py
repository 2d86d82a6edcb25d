"""Kernel specs: one TOML file per kernel in codegen/specs, validated here. A spec is the single schema from which
the Rust signature, the entry point, the Python argument packer and the launch checks are derived."""

from __future__ import annotations

import keyword
import re
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from rust_kernels.errors import SpecError
from rust_kernels.paths import SPECS, TEMPLATES


@dataclass(frozen=True)
class DType:
    """A storage dtype (also its Rust type's name), with the type kernels accumulate it in."""

    name: str
    numpy: str  # NumPy's (and PyTorch's) name; bfloat16 comes from ml_dtypes
    size: int
    acc: str  # the accumulation type (Float::Acc)
    acc_size: int
    unit_roundoff: float  # of the accumulation type
    storage_roundoff: float  # of rounding a result from the accumulation type into this one (0: no rounding)
    smallest_subnormal: float

    @property
    def acc_numpy(self) -> str:
        return DTYPES[self.acc].numpy

    def numpy_dtype(self) -> np.dtype:
        if self.name == "bf16":
            import ml_dtypes  # NumPy has no bfloat16 of its own

            return np.dtype(ml_dtypes.bfloat16)
        return np.dtype(self.numpy)


DTYPES = {
    "f32": DType("f32", "float32", 4, "f32", 4, 2.0**-24, 0.0, 2.0**-149),
    "f64": DType("f64", "float64", 8, "f64", 8, 2.0**-53, 0.0, 2.0**-1074),
    "bf16": DType("bf16", "bfloat16", 2, "f32", 4, 2.0**-24, 2.0**-8, 2.0**-133),
    "f16": DType("f16", "float16", 2, "f32", 4, 2.0**-24, 2.0**-11, 2.0**-24),
}

# Element types pointers may point to, by the names NumPy and PyTorch give them, with their sizes.
ELEMENTS = {"float32": "f32", "float64": "f64", "bfloat16": "bf16", "float16": "f16", "int32": "i32", "uint32": "u32",
            "int64": "i64", "uint64": "u64"}  # fmt: skip
ELEMENT_SIZES = {"f32": 4, "f64": 8, "bf16": 2, "f16": 2, "i32": 4, "u32": 4, "i64": 8, "u64": 8}
# Scalar parameter types (4- or 8-byte values).
SCALARS = ("i32", "u32", "i64", "u64", "f32", "f64")
POINTER = re.compile(r"^\*(mut|const) (D|A|f32|f64|bf16|f16|i32|u32|i64|u64)$")  # D: the dtype, A: its Acc
SNAKE = re.compile(r"^[a-z_][a-z0-9_]*$")
IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
CONST = re.compile(r"^[A-Z][A-Z0-9_]*$")
# Rust keywords (strict and reserved) are not identifiers; Python's are checked too since names become attributes.
RUST_KEYWORDS = frozenset(
    """as async await break const continue crate dyn else enum extern false fn for if impl in let loop match mod move
    mut pub ref return self Self static struct super trait true type unsafe use where while abstract become box do
    final gen macro override priv try typeof unsized virtual yield""".split()
)


@dataclass(frozen=True)
class ConstSpec:
    name: str
    type: str
    doc: str
    min: int
    max: int
    power_of_two: bool

    @property
    def field(self) -> str:
        """The Python attribute and keyword argument: the name lower-cased (BLOCK_HW -> block_hw)."""
        return self.name.lower()

    def values(self) -> list[int]:
        """Every value this const accepts, in increasing order."""
        return [v for v in range(self.min, self.max + 1) if self.accepts(v)]

    def accepts(self, value: int) -> bool:
        return self.min <= value <= self.max and (not self.power_of_two or value & (value - 1) == 0)

    def describe(self) -> str:
        kind = "a power of two" if self.power_of_two else "an integer"
        return f"{kind} from {self.min} to {self.max}"


@dataclass(frozen=True)
class ArgSpec:
    name: str
    type: str  # as written in the spec: "*mut D", "i32", ...

    @property
    def is_pointer(self) -> bool:
        return self.type.startswith("*")

    @property
    def generic(self) -> str:
        """The Rust type in the generic kernel: "*mut A" -> "*mut D::Acc"."""
        return self.type.replace(" A", " D::Acc")

    def concrete(self, dtype: str) -> str:
        """The Rust type with the dtype substituted: "*mut D" -> "*mut f32", "*mut A" -> its accumulation type."""
        if not self.is_pointer:
            return self.type
        return self.type.replace(" D", f" {dtype}").replace(" A", f" {DTYPES[dtype].acc}")

    def element(self, dtype: str) -> str:
        """The pointee's type name (pointer args) or the scalar's type name."""
        return self.concrete(dtype).split()[-1]


@dataclass(frozen=True)
class KernelSpec:
    name: str
    template: str
    doc: str
    dtypes: tuple[str, ...]
    consts: tuple[ConstSpec, ...]
    args: tuple[ArgSpec, ...]
    grid: tuple[str | int, ...]
    block: tuple[str | int, ...]
    shared_accumulators_per_warp: int
    path: Path

    @property
    def class_name(self) -> str:
        """PascalCase of the name, splitting on '_' (batch_norm_2d_nchw_backward -> BatchNorm2dNchwBackward)."""
        return "".join(part[:1].upper() + part[1:] for part in self.name.split("_"))


def _fail(path: Path, message: str) -> SpecError:
    return SpecError(f"{path.name}: {message}")


def _identifier(path: Path, what: str, name: object, pattern: re.Pattern[str]) -> str:
    if not isinstance(name, str) or not pattern.match(name) or name in RUST_KEYWORDS or keyword.iskeyword(name):
        raise _fail(path, f"{what} {name!r} is not a valid identifier (expected {pattern.pattern}, not a keyword)")
    return name


def _dims(path: Path, what: str, value: object, names: set[str]) -> tuple[str | int, ...]:
    if not isinstance(value, list) or len(value) != 3:
        raise _fail(path, f"{what} must be a list of 3 entries (x, y, z)")
    for entry in value:
        if not (isinstance(entry, int) and entry >= 1) and entry not in names:
            raise _fail(path, f"{what} entry {entry!r} is neither a positive integer nor one of {sorted(names)}")
    return tuple(value)


def parse_spec(path: Path) -> KernelSpec:
    """Reads and validates one spec file; raises SpecError naming the file and the field."""
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise _fail(path, f"not valid TOML: {err}") from None
    missing = {"name", "template", "doc", "dtypes", "args", "grid", "block"} - raw.keys()
    if missing:
        raise _fail(path, f"missing fields {sorted(missing)}")
    name = _identifier(path, "kernel name", raw["name"], SNAKE)
    if not (TEMPLATES / raw["template"]).is_file():
        raise _fail(path, f"template {raw['template']!r} not found in {TEMPLATES}")
    dtypes = tuple(raw["dtypes"])
    if not dtypes or any(d not in DTYPES for d in dtypes):
        raise _fail(path, f"dtypes {list(dtypes)} must be a non-empty subset of {sorted(DTYPES)}")

    consts = []
    for c in raw.get("consts", []):
        const = ConstSpec(
            name=_identifier(path, "const", c.get("name"), CONST),
            type=c.get("type", "u32"),
            doc=c.get("doc", ""),
            min=c.get("min", 1),
            max=c.get("max", 2**31 - 1),
            power_of_two=c.get("power_of_two", False),
        )
        if const.type not in ("u32", "i32", "usize"):
            raise _fail(path, f"const {const.name} has type {const.type!r}; expected u32, i32 or usize")
        if not const.values():
            raise _fail(path, f"const {const.name} accepts no value")
        consts.append(const)

    args = []
    for a in raw["args"]:
        arg = ArgSpec(_identifier(path, "argument", a.get("name"), IDENT), a.get("type", ""))
        if not (POINTER.match(arg.type) or arg.type in SCALARS):
            raise _fail(path, f"argument {arg.name} has type {arg.type!r}; expected *mut D, *const D or a scalar")
        args.append(arg)
    names = [a.name for a in args] + [c.name for c in consts]
    if len(set(names)) != len(names):
        raise _fail(path, "argument and const names must be unique")

    scalar_args = {a.name for a in args if not a.is_pointer and a.type in ("i32", "u32")}
    return KernelSpec(
        name=name,
        template=raw["template"],
        doc=raw["doc"].strip(),
        dtypes=dtypes,
        consts=tuple(consts),
        args=tuple(args),
        grid=_dims(path, "grid", raw["grid"], scalar_args),
        block=_dims(path, "block", raw["block"], {c.name for c in consts}),
        shared_accumulators_per_warp=int(raw.get("shared_accumulators_per_warp", 0)),
        path=path,
    )


@cache
def load_specs(directory: Path = SPECS) -> tuple[KernelSpec, ...]:
    """Every spec of the catalogue, sorted by name."""
    specs = tuple(sorted((parse_spec(p) for p in directory.glob("*.toml")), key=lambda s: s.name))
    seen = set()
    for spec in specs:
        if spec.name in seen:
            raise _fail(spec.path, f"kernel name {spec.name!r} is used by two specs")
        seen.add(spec.name)
    return specs
