"""Kernel specs: one TOML file per kernel (and its [[variants]]), validated here. A spec is the single schema from
which the Rust signature, the entry point, the Python argument packer and the launch checks are derived. Its
template (the kernel body, a Jinja2 template or plain Rust) sits in the spec's own directory; templates shared by
every kernel (the entry point, reductions) come from the package's codegen/templates. Consts that several specs of a
directory declare alike are defined once in its consts.toml (SHARED_CONSTS).

Every problem is refused when the spec is loaded, with the file and the field named.
"""

from __future__ import annotations

import ast
import keyword
import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import CodeType

from rust_kernels.dtypes import DTYPES, SCALARS
from rust_kernels.errors import ArgumentError, SpecError

ACC = "A"  # in a spec's types: the dtype's accumulation type (D::Acc)
PARAM = "P"  # in a spec's types: the parameters' dtype, D or one sharing D's accumulation type (param_dtypes)
POINTER = re.compile(r"\*mut (D|A|P|f32|f64|bf16|f16|i32|u32|i64|u64)")
SNAKE = re.compile(r"[a-z_][a-z0-9_]*")
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
CONST = re.compile(r"[A-Z][A-Z0-9_]*")
MAX_CONST_VALUES = 4096  # a const enumerates its values (catalogue instances, checks): keep that bounded
MAX_INSTANCES = 65536  # per spec: dtypes x parameter dtypes x every const's values (each may be built)
SHARED_PREFIX = "rust_kernels/"  # the package's shared templates, which no kernel's own template can shadow
SHARED_CONSTS = "consts.toml"  # a spec directory's [[consts]] that its specs take by name (`shared = true`): no spec
CONST_RANGES = {"u32": (0, 2**32 - 1), "i32": (-(2**31), 2**31 - 1), "usize": (0, 2**64 - 1)}
# A const becomes the descriptor attribute of its lower-cased name: it may not be one the descriptor has already.
RESERVED_FIELDS = frozenset(
    """args block_dim const_values consts dtype dtype_info dtype_key entry_point_name entry_point_source grid_dim id
    kernel_source name param_dtype shared_mem_bytes source source_sha256 spec spec_names""".split()
)
MIN_REGISTERS, MAX_REGISTERS = 16, 255  # what a [[registers]] cap may be (ptxas' range for .maxnreg)
PRECONDITION_NAMES = frozenset({"DSIZE"})  # names preconditions see besides the arguments and consts
# Rust keywords (strict and reserved) are not identifiers; Python's are checked too since names become attributes.
RUST_KEYWORDS = frozenset(
    """as async await break const continue crate dyn else enum extern false fn for if impl in let loop match mod move
    mut pub ref return self Self static struct super trait true type unsafe use where while abstract become box do
    final gen macro override priv try typeof unsized virtual yield""".split()
)
GENERIC_NAMES = frozenset({"D", ACC, PARAM})  # the kernel's dtype parameters and D's accumulation type
RESERVED_CLASSES = frozenset({"Kernel", "Program", "KernelSpec", "ObjectCode"})  # the package's own classes


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
        if self.power_of_two:
            return [1 << k for k in range(max(self.max, 1).bit_length()) if self.accepts(1 << k)]
        return list(range(self.min, self.max + 1))

    def accepts(self, value: int) -> bool:
        return self.min <= value <= self.max and (not self.power_of_two or value & (value - 1) == 0)

    def describe(self) -> str:
        kind = "a power of two" if self.power_of_two else "an integer"
        return f"{kind} from {self.min} to {self.max}"


@dataclass(frozen=True)
class ArgSpec:
    name: str
    type: str  # as written in the spec: "*mut D", "i32", "A", ...
    output: bool = False  # the kernel writes through this pointer: it must be writeable

    @property
    def is_pointer(self) -> bool:
        return self.type.startswith("*")

    @property
    def generic(self) -> str:
        """The Rust type in the generic kernel: "*mut A" -> "*mut D::Acc", "A" -> "D::Acc" ("P" stays P)."""
        if self.type == ACC:
            return "D::Acc"
        return self.type.replace(" A", " D::Acc")

    def concrete(self, dtype: str, param: str | None = None) -> str:
        """The Rust type with the dtypes substituted: "*mut D" -> "*mut f32", "A" -> D's accumulation type, "P" ->
        the parameters' dtype `param` (default: D)."""
        substitute = {"D": dtype, ACC: DTYPES[dtype].acc, PARAM: param or dtype}
        if not self.is_pointer:
            return substitute.get(self.type, self.type)
        kind, element = self.type.rsplit(" ", 1)
        return f"{kind} {substitute.get(element, element)}"

    def element(self, dtype: str, param: str | None = None) -> str:
        """The pointee's type name (pointer args) or the scalar's type name."""
        return self.concrete(dtype, param).split()[-1]


@dataclass(frozen=True)
class Requirement:
    """A launch precondition: where `when` holds, `check` must, else the launch is refused with `message`. Both are
    arithmetic over the consts, the scalar arguments, DSIZE (bytes of D) and pointer arguments (as addresses)."""

    when: str
    check: str
    message: str
    code: tuple[CodeType, CodeType]

    def of_instance(self, names: Mapping[str, int]) -> bool:
        """Whether `names` (an instance's consts and DSIZE) are all this precondition reads."""
        return {n for code in self.code for n in code.co_names} <= names.keys()

    def holds(self, names: Mapping[str, int | float]) -> bool:
        """Whether the precondition holds for these values; arithmetic that fails (a modulo by zero) is an
        ArgumentError naming the precondition and the values it read."""
        when, check = self.code
        scope = {"__builtins__": {}}
        try:
            return not eval(when, scope, names) or bool(eval(check, scope, names))
        except ArithmeticError as err:
            used = {n: names[n] for code in self.code for n in code.co_names if n in names}
            raise ArgumentError(f"precondition {self.check!r} (when {self.when!r}) cannot be evaluated with {used}: "
                                f"{err}") from None  # fmt: skip


@dataclass(frozen=True)
class RegisterCap:
    """A cap on the registers ptxas gives each thread (PTX .maxnreg) of the instances where `when` holds (an
    expression over the consts and DSIZE). With only the CTA size (.maxntid) to go by, ptxas may keep a kernel's
    registers, and so the loads it has in flight, lower than its speed wants; a cap above that lets it take more."""

    when: str
    limit: int
    code: CodeType

    def applies(self, names: Mapping[str, int]) -> bool:
        try:
            return bool(eval(self.code, {"__builtins__": {}}, names))
        except ArithmeticError as err:
            raise SpecError(f"[[registers]] when {self.when!r} cannot be evaluated with {dict(names)}: {err}") from None


_EXPRESSION_NODES = (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.Compare, ast.BinOp, ast.UnaryOp, ast.Not,
                     ast.USub, ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.Eq, ast.NotEq, ast.Lt, ast.LtE,
                     ast.Gt, ast.GtE, ast.Name, ast.Load, ast.Constant)  # fmt: skip


REQUIRED_FIELDS = frozenset({"name", "template", "doc", "dtypes", "args", "grid", "block"})
OPTIONAL_FIELDS = frozenset({"consts", "param_dtypes", "shared_accumulators_per_warp", "requires", "registers",
                             "cooperative"})  # fmt: skip
SPEC_FIELDS = REQUIRED_FIELDS | OPTIONAL_FIELDS  # what a file's kernel has, and what a variant may set
CONST_KEYS = frozenset({"name", "type", "doc", "min", "max", "power_of_two"})
ARG_KEYS = frozenset({"name", "type", "output"})
REQUIRE_KEYS = frozenset({"when", "check", "message"})


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
    requires: tuple[Requirement, ...]
    path: Path
    # Parameter dtypes P may take besides D (each sharing D's accumulation type, e.g. f32 beside bf16): a spec axis
    # (torch.autocast's pairing), not a copy of the spec. Empty where the spec has no P.
    param_dtypes: tuple[str, ...] = ()
    registers: tuple[RegisterCap, ...] = ()  # [[registers]]: the first whose `when` holds caps an instance
    # Every CTA of a launch resident at once (the driver's cooperative launch), as `grid::sync` needs.
    cooperative: bool = False

    def impossible(self, names: Mapping[str, int]) -> str | None:
        """Why no launch of the instance whose consts (and DSIZE) are `names` can run: the message of a precondition
        over those alone that fails (the catalogue leaves such instances out), else None."""
        return next((r.message for r in self.requires if r.of_instance(names) and not r.holds(names)), None)

    def max_registers(self, names: Mapping[str, int]) -> int | None:
        """The register cap of the instance whose consts (and DSIZE) are `names`, or None (ptxas decides)."""
        return next((cap.limit for cap in self.registers if cap.applies(names)), None)

    @property
    def has_param(self) -> bool:
        """Whether the kernel is generic in a parameter dtype P besides D."""
        return any(a.type == PARAM or a.type.endswith(f" {PARAM}") for a in self.args)

    def params_for(self, dtype: str) -> tuple[str, ...]:
        """The parameter dtypes an instance of dtype `dtype` may take: D first, then those sharing its
        accumulation type."""
        if not self.has_param:
            return (dtype,)
        extra = [p for p in self.param_dtypes if p != dtype and DTYPES[p].acc == DTYPES[dtype].acc]
        return (dtype, *extra)

    @property
    def directory(self) -> Path:
        return self.path.parent

    @property
    def class_name(self) -> str:
        return class_name(self.name)


def class_name(name: str) -> str:
    """PascalCase of a kernel name, splitting on '_' (batch_norm_2d_nchw_backward -> BatchNorm2dNchwBackward)."""
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def _fail(path: Path, message: str) -> SpecError:
    return SpecError(f"{path}: {message}")


def _identifier(path: Path, what: str, name: object, pattern: re.Pattern[str]) -> str:
    if (
        not isinstance(name, str)
        or not pattern.fullmatch(name)
        or not name.strip("_")
        or name in RUST_KEYWORDS
        or keyword.iskeyword(name)
    ):
        raise _fail(path, f"{what} {name!r} is not a valid identifier (expected {pattern.pattern}, not a keyword)")
    return name


FREE = "*"  # a grid entry the caller chooses (any positive size)


def _dims(path: Path, what: str, value: object, names: set[str]) -> tuple[str | int, ...]:
    if not isinstance(value, list) or len(value) != 3:
        raise _fail(path, f"{what} must be a list of 3 entries (x, y, z)")
    for entry in value:
        if not (isinstance(entry, int) and not isinstance(entry, bool) and entry >= 1) and entry not in names:
            raise _fail(path, f"{what} entry {entry!r} is neither a positive integer nor one of {sorted(names)}")
    return tuple(value)


def _int(path: Path, what: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(path, f"{what} must be an integer, got {value!r}")
    return value


def _entry_keys(path: Path, table: str, raw: dict, keys: frozenset[str]) -> None:
    """Refuses an entry's misspelt key (`ouput = true` would otherwise leave a pointer unchecked as an output)."""
    unknown = raw.keys() - keys
    if unknown:
        raise _fail(path, f"[[{table}]] entry {raw.get('name', raw)!r}: unknown keys {sorted(unknown)} (an entry has "
                          f"{sorted(keys)})")  # fmt: skip


def _const(path: Path, raw: object) -> ConstSpec:
    if not isinstance(raw, dict):
        raise _fail(path, f"each [[consts]] entry must be a table, got {raw!r}")
    if "shared" in raw:
        return _shared_const(path, raw)
    _entry_keys(path, "consts", raw, CONST_KEYS)
    name = _identifier(path, "const", raw.get("name"), CONST)
    if name in GENERIC_NAMES:
        raise _fail(path, f"const {name!r} clashes with the kernel's dtype parameters {sorted(GENERIC_NAMES)}")
    if name.lower() in RESERVED_FIELDS:
        raise _fail(path, f"const {name!r} would replace the descriptor's attribute {name.lower()!r}: rename it")
    if "max" not in raw:
        raise _fail(path, f"const {name} needs a max (its values are enumerated)")
    const = ConstSpec(
        name=name,
        type=raw.get("type", "u32"),
        doc=str(raw.get("doc", "")),
        min=_int(path, f"const {name}: min", raw.get("min", 1)),
        max=_int(path, f"const {name}: max", raw["max"]),
        power_of_two=bool(raw.get("power_of_two", False)),
    )
    if const.type not in ("u32", "i32", "usize"):
        raise _fail(path, f"const {name} has type {const.type!r}; expected u32, i32 or usize")
    low, high = CONST_RANGES[const.type]
    if not low <= const.min <= const.max <= high:
        raise _fail(path, f"const {name}: min {const.min} and max {const.max} must satisfy {low} <= min <= max <= "
                    f"{high} (the range of {const.type})")  # fmt: skip
    if const.max - const.min >= MAX_CONST_VALUES and not const.power_of_two:
        raise _fail(path, f"const {name} spans {const.max - const.min + 1} values; at most {MAX_CONST_VALUES}")
    if not const.values():
        raise _fail(path, f"const {name} accepts no value")
    return const


def _shared_const(path: Path, raw: dict) -> ConstSpec:
    """An entry `{name = "X", shared = true}`: the const X as the directory's consts.toml defines it, so that the
    specs declaring it alike (batch_norm's ACTIVATION) have one definition to change."""
    name, shared = raw.get("name"), path.with_name(SHARED_CONSTS)
    if path == shared:
        raise _fail(path, f"const {name!r}: the entries here define the shared consts, none of them is shared itself")
    if raw["shared"] is not True or raw.keys() != {"name", "shared"}:
        raise _fail(path, f"[[consts]] entry {name!r}: a shared const's entry holds its name and `shared = true` only "
                          f"(its definition is in {SHARED_CONSTS})")  # fmt: skip
    raw_shared = _read(shared)
    _known_fields(shared, raw_shared, frozenset({"consts"}))
    definitions = raw_shared.get("consts", [])
    if not isinstance(definitions, list):
        raise _fail(shared, "consts must be a list of [[consts]] tables")
    for definition in definitions:
        if isinstance(definition, dict) and definition.get("name") == name:
            return _const(shared, definition)
    known = [d.get("name") for d in definitions if isinstance(d, dict)]
    raise _fail(path, f"shared const {name!r} is not defined in {shared} (it defines {known})")


def _arg(path: Path, raw: object) -> ArgSpec:
    if not isinstance(raw, dict):
        raise _fail(path, f"each [[args]] entry must be a table, got {raw!r}")
    _entry_keys(path, "args", raw, ARG_KEYS)
    name = _identifier(path, "argument", raw.get("name"), IDENT)
    kind = raw.get("type", "")
    if isinstance(kind, str) and kind.startswith("*const "):
        raise _fail(path, f"argument {name} has type {kind!r}: pointers are `*mut` (as rust-cuda passes them)")
    if not isinstance(kind, str) or not (POINTER.fullmatch(kind) or kind in SCALARS or kind in (ACC, PARAM)):
        raise _fail(
            path, f"argument {name} has type {kind!r}; expected *mut D, *mut A, *mut P, *mut <type>, a scalar, A or P"
        )
    output = raw.get("output", False)
    if not isinstance(output, bool) or (output and not kind.startswith("*")):
        raise _fail(path, f"argument {name}: output must be true or false, and only pointers are outputs")
    return ArgSpec(name, kind, output)


def _expression(path: Path, text: object, names: set[str]) -> CodeType:
    if not isinstance(text, str):
        raise _fail(path, f"requirement {text!r} must be a string")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as err:
        raise _fail(path, f"requirement {text!r} is not an expression: {err.msg}") from None
    for node in ast.walk(tree):
        if not isinstance(node, _EXPRESSION_NODES):
            raise _fail(path, f"requirement {text!r}: {type(node).__name__} is not allowed (arithmetic and compares)")
        if isinstance(node, ast.Name) and node.id not in names:
            raise _fail(path, f"requirement {text!r}: unknown name {node.id!r} (known: {sorted(names)})")
        if isinstance(node, ast.Constant) and (isinstance(node.value, bool) or not isinstance(node.value, int)):
            raise _fail(path, f"requirement {text!r}: only integer constants are allowed")
    return compile(tree, str(path), "eval")


def _requirement(path: Path, raw: object, names: set[str]) -> Requirement:
    if not isinstance(raw, dict) or "check" not in raw or "message" not in raw:
        raise _fail(path, "each [[requires]] entry needs `check` and `message` (and may have `when`)")
    _entry_keys(path, "requires", raw, REQUIRE_KEYS)
    when = raw.get("when", "1")
    code = (_expression(path, when, names), _expression(path, raw["check"], names))
    return Requirement(str(when), raw["check"], str(raw["message"]), code)


def _register_cap(path: Path, raw: object, names: set[str]) -> RegisterCap:
    if not isinstance(raw, dict) or "max" not in raw or raw.keys() - {"max", "when"}:
        raise _fail(path, f"each [[registers]] entry needs `max` (and may have `when`), got {raw!r}")
    limit = _int(path, "[[registers]] max", raw["max"])
    if not MIN_REGISTERS <= limit <= MAX_REGISTERS:
        raise _fail(path, f"[[registers]] max must lie in [{MIN_REGISTERS}, {MAX_REGISTERS}] (PTX .maxnreg), "
                          f"got {limit}")  # fmt: skip
    when = raw.get("when", "1")
    return RegisterCap(str(when), limit, _expression(path, when, names))


def _template(path: Path, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise _fail(path, f"template must be a file name, got {value!r}")
    directory = path.parent.resolve()
    file = (directory / value).resolve()
    if not file.is_relative_to(directory):
        raise _fail(path, f"template {value!r} lies outside the spec's directory {directory}")
    if value.startswith(SHARED_PREFIX):
        raise _fail(path, f"template {value!r}: the prefix {SHARED_PREFIX!r} is reserved for the shared templates")
    if not file.is_file():
        raise _fail(path, f"template {value!r} not found in {directory}")
    return file.relative_to(directory).as_posix()


def parse_specs(path: Path) -> tuple[KernelSpec, ...]:
    """Reads and validates one spec file: its kernel, then each of its [[variants]]; raises SpecError naming the
    file, the variant and the field."""
    raw = _read(path)
    _known_fields(path, raw, SPEC_FIELDS | {"variants"})
    variants = raw.pop("variants", [])
    if not isinstance(variants, list):
        raise _fail(path, "variants must be a list of [[variants]] tables")
    specs = [_spec(path, raw)]
    for number, entry in enumerate(variants, 1):
        name = entry.get("name") if isinstance(entry, dict) else None
        label = f"variant {name!r}" if isinstance(name, str) else f"[[variants]] entry {number}"
        try:
            variant = _spec(path, _variant(path, raw, entry))
            check_unique((*specs, variant))
        except SpecError as err:
            # The same validation as a spec of its own, its message prefixed with the variant it is about.
            raise _fail(path, f"{label}: {str(err).removeprefix(f'{path}: ')}") from None
        specs.append(variant)
    return tuple(specs)


def _read(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise _fail(path, f"not valid TOML: {err}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise _fail(path, f"cannot be read: {err}") from None


def _known_fields(path: Path, raw: dict, known: frozenset[str]) -> None:
    unknown = raw.keys() - known
    if unknown:
        raise _fail(path, f"unknown fields {sorted(unknown)} (it has {sorted(known)})")


def _variant(path: Path, base: dict, raw: object) -> dict:
    """A [[variants]] entry as a spec of its own: the base's fields, each the variant gives replacing the base's,
    except its consts and args, which are merged into the base's (_merged), and its requires where it keeps the
    base's too (`requires_base = true`: a narrower kernel that needs what its base needs and more)."""
    if not isinstance(raw, dict):
        raise _fail(path, f"each [[variants]] entry must be a table, got {raw!r}")
    missing = {"name", "doc"} - raw.keys()
    if missing:
        raise _fail(path, f"missing fields {sorted(missing)} (a variant names its kernel and says what it does)")
    _known_fields(path, raw, SPEC_FIELDS | {"requires_base"})
    derived = base | raw
    for key in ("consts", "args"):
        if key in raw:
            derived[key] = _merged(path, key, base.get(key, []), raw[key])
    keep = derived.pop("requires_base", False)
    if not isinstance(keep, bool):
        raise _fail(path, f"requires_base must be true or false, got {keep!r}")
    if keep and isinstance(raw.get("requires", []), list):  # else _spec says what is wrong with them
        derived["requires"] = [*base.get("requires", []), *raw.get("requires", [])]
    return derived


def _merged(path: Path, key: str, base: list, changes: object) -> list:
    """The base's [[consts]] or [[args]] with a variant's: an entry named as one there replaces it in place; any
    other goes right after the entry its `after` names, or at the end."""
    if not isinstance(changes, list) or not all(isinstance(c, dict) for c in changes):
        raise _fail(path, f"{key} must be a list of [[{key}]] tables")
    merged = list(base)
    for change in changes:
        entry = {k: v for k, v in change.items() if k != "after"}
        names = [e.get("name") for e in merged]
        if entry.get("name") in names:
            if "after" in change:
                raise _fail(path, f"{key} entry {entry['name']!r} replaces the base's in place: it takes no `after`")
            merged[names.index(entry["name"])] = entry
        elif "after" in change:
            if change["after"] not in names:
                raise _fail(path, f"{key} entry {entry.get('name')!r}: after {change['after']!r} names none of "
                                  f"{names}")  # fmt: skip
            merged.insert(names.index(change["after"]) + 1, entry)
        else:
            merged.append(entry)
    return merged


def _spec(path: Path, raw: dict) -> KernelSpec:
    """One kernel's spec from its fields (a file's own, or a variant's derived from them)."""
    missing = REQUIRED_FIELDS - raw.keys()
    if missing:
        raise _fail(path, f"missing fields {sorted(missing)}")
    cooperative = raw.get("cooperative", False)
    if not isinstance(cooperative, bool):
        raise _fail(path, f"cooperative must be true or false, got {cooperative!r}")
    name = _identifier(path, "kernel name", raw["name"], SNAKE)
    if class_name(name) in RESERVED_CLASSES:
        raise _fail(path, f"kernel name {name!r} would shadow rust_kernels' own class {class_name(name)}")
    template = _template(path, raw["template"])
    dtypes = tuple(raw["dtypes"]) if isinstance(raw["dtypes"], list) else ()
    if not dtypes or any(d not in DTYPES for d in dtypes) or len(set(dtypes)) != len(dtypes):
        raise _fail(path, f"dtypes {raw['dtypes']!r} must be a non-empty list of distinct names from {sorted(DTYPES)}")

    params = raw.get("param_dtypes", [])
    if not isinstance(params, list) or any(p not in DTYPES for p in params) or len(set(params)) != len(params):
        raise _fail(path, f"param_dtypes {params!r} must be a list of distinct names from {sorted(DTYPES)}")
    consts = tuple(_const(path, c) for c in raw.get("consts", []))
    if not isinstance(raw["args"], list) or not raw["args"]:
        raise _fail(path, "args must be a non-empty list of [[args]] tables")
    args = tuple(_arg(path, a) for a in raw["args"])
    names = [a.name for a in args] + [c.name for c in consts]
    if len(set(names)) != len(names):
        raise _fail(path, "argument and const names must be unique")
    if GENERIC_NAMES & set(names):
        raise _fail(path, f"names {sorted(GENERIC_NAMES & set(names))} clash with the kernel's dtype parameters")
    if PRECONDITION_NAMES & set(names):
        raise _fail(path, f"names {sorted(PRECONDITION_NAMES & set(names))} are reserved for the preconditions")
    if params and not any(a.type in (PARAM, f"*mut {PARAM}") for a in args):
        raise _fail(path, "param_dtypes is set but no argument has type P or *mut P")

    scalar_args = {a.name for a in args if not a.is_pointer and a.type in ("i32", "u32")}
    shared = _int(path, "shared_accumulators_per_warp", raw.get("shared_accumulators_per_warp", 0))
    if shared < 0:
        raise _fail(path, f"shared_accumulators_per_warp must not be negative, got {shared}")
    known = {*names, *PRECONDITION_NAMES}
    requires = tuple(_requirement(path, r, known) for r in raw.get("requires", []))
    registers = tuple(_register_cap(path, r, {c.name for c in consts} | PRECONDITION_NAMES)
                      for r in raw.get("registers", []))  # fmt: skip
    count = len(dtypes) * (1 + len(params)) * math.prod(len(c.values()) for c in consts)
    if count > MAX_INSTANCES:
        raise _fail(path, f"its dtypes and consts make up to {count} instances; at most {MAX_INSTANCES} per spec")
    return KernelSpec(
        name=name,
        template=template,
        doc=str(raw["doc"]).strip(),
        dtypes=dtypes,
        consts=consts,
        args=args,
        grid=_dims(path, "grid", raw["grid"], {*scalar_args, FREE}),
        block=_dims(path, "block", raw["block"], {c.name for c in consts}),
        shared_accumulators_per_warp=shared,
        requires=requires,
        path=path,
        param_dtypes=tuple(params),
        registers=registers,
        cooperative=cooperative,
    )


def load_specs(directory: Path) -> tuple[KernelSpec, ...]:
    """Every kernel of the spec files (*.toml but consts.toml) in `directory`, sorted by name; names and class names
    must be unique."""
    if not directory.is_dir():
        raise SpecError(f"{directory}: not a directory of kernel specs")
    files = (p for p in directory.glob("*.toml") if p.name != SHARED_CONSTS)
    specs = tuple(sorted((s for p in files for s in parse_specs(p)), key=lambda s: s.name))
    check_unique(specs)
    return specs


def check_unique(specs: tuple[KernelSpec, ...]) -> None:
    """Refuses two specs with one kernel name or one class name (one of them would be silently dropped), be they
    in two files or in one (a file's kernel and its variants)."""
    seen: dict[str, KernelSpec] = {}
    for spec in specs:
        for key in (spec.name, spec.class_name):
            other = seen.get(key)
            if other is not None and other is not spec:
                raise _fail(spec.path, f"kernel {spec.name!r} collides with kernel {other.name!r} of {other.path} "
                                       f"(both map to {key!r})")  # fmt: skip
            seen[key] = spec
