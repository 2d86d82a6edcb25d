"""Rendering: spec + Jinja2 templates -> Rust source (kernel body and entry point) and the kernel crates built from
it. Everything that turns a spec into Rust text lives here.

Templates render in a sandboxed Jinja2 environment (no attribute walks to Python internals), each loader scoped to
its directory (a name or a symlink that resolves outside it is not found). A kernel's own templates are its spec's
directory; the package's shared ones (entry point, crates, reductions) are reachable only under the reserved prefix
`rust_kernels/` (`{% from "rust_kernels/reduce.rs.j2" import block_sum %}`), which no user template can shadow. A
kernel body is rendered per instance: it sees `spec`, `dtype` (the dtype key, "bf16-f32"), `param` and every const
by name. Template errors are SpecErrors naming the template file and line; generated Rust may not read files at
build time (`include!`, `include_str!`, `include_bytes!`, `#[path]`): they would escape the kernel's directory and
its cache key. Where rustc rejects the generated Rust, template_lines names the template line behind each generated
line (recomputed then, never on a successful build).

Renders are memoised per instance while the template files they can read are unchanged: each new shape's plans make
new kernel objects of the same few instances, and rendering them again was most of a new shape's first call.
"""

from __future__ import annotations

import contextvars
import os
import re
import sys
import threading
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
from jinja2 import nodes
from jinja2.sandbox import SandboxedEnvironment

from rust_kernels import resources
from rust_kernels.dtypes import DTYPES, activations
from rust_kernels.errors import SpecError
from rust_kernels.spec import SHARED_PREFIX, KernelSpec
from rust_kernels.version import __version__

if TYPE_CHECKING:
    from rust_kernels.kernels import Kernel

# "include" is matched first and then checked not to continue a word (a leading \\b would cost the regex its literal
# prefix: 1 ms per kernel source instead of 0.1).
FILE_READS = re.compile(r"include(?<!\winclude)(?:_str|_bytes)?\s*!|#\s*\[\s*path\b")


class ScopedLoader(jinja2.FileSystemLoader):
    """One directory's templates and nothing outside it: a name that resolves elsewhere (`..`, a symlink) is refused."""

    def get_source(self, environment: jinja2.Environment, template: str) -> tuple[str, str, Any]:
        source, filename, uptodate = super().get_source(environment, template)
        root = Path(self.searchpath[0]).resolve()
        if not Path(filename).resolve().is_relative_to(root):
            raise jinja2.TemplateNotFound(f"{template} (it resolves to {Path(filename).resolve()}, outside {root})")
        return source, filename, uptodate


@dataclass(frozen=True)
class TemplateLine:
    """A line of a template: its file, its number and its text."""

    filename: str
    line: int
    text: str


@dataclass(frozen=True)
class Origin:
    """Where a generated line came from: a template line, and the macro calls that expanded it, innermost first."""

    at: TemplateLine
    calls: tuple[TemplateLine, ...] = ()


class _Markers:
    """The invisible markers of a marked render: one private-use character each (planes 15 and 16, in no template's
    text) for a kind of mark at a template line: a literal line (DATA), the start of an expression's output (VALUE)
    or of a macro call's (CALL); END ends an expression's output. Shared by every marking environment."""

    DATA, VALUE, CALL = range(3)
    FIRST, END = 0xF0000, "\U0010fffd"
    PATTERN = re.compile("[\U000f0000-\U0010fffd]")
    BLANK = re.compile("[\\s\U000f0000-\U0010fffd]*")  # whitespace and markers

    def __init__(self) -> None:
        self._marks: list[tuple[int, TemplateLine]] = []
        self._index: dict[tuple[int, TemplateLine], int] = {}
        self._lock = threading.Lock()

    def marker(self, kind: int, where: TemplateLine) -> str:
        with self._lock:
            index = self._index.setdefault((kind, where), len(self._marks))
            if index == len(self._marks):
                self._marks.append((kind, where))
        if self.FIRST + index >= ord(self.END):
            raise _Unmapped(f"more than {ord(self.END) - self.FIRST} template marks")
        return chr(self.FIRST + index)

    def read(self, marker: str) -> tuple[int, TemplateLine]:
        return self._marks[ord(marker) - self.FIRST]


class _Unmapped(Exception):
    """The generated lines cannot be traced back to their templates."""


_MARKERS = _Markers()
_MARKING = contextvars.ContextVar("marking", default=False)  # set while template_lines renders marked


class _MarkingEnvironment(SandboxedEnvironment):
    """Compiles every template it loads (a body, what it includes or imports) with markers in its output: before
    each literal line that is not blank, and around each expression."""

    def compile(self, source: str | nodes.Template, name: str | None = None, filename: str | None = None,
                raw: bool = False, defer_init: bool = False) -> Any:  # fmt: skip
        if isinstance(source, str):
            source = self._marked(self.parse(source, name, filename), filename or name or "<template>", source)
        return super().compile(source, name, filename, raw, defer_init)

    def _marked(self, tree: nodes.Template, filename: str, source: str) -> nodes.Template:
        lines = re.split(r"\r\n|\r|\n", source)  # the lexer's newlines, which its line numbers count

        def mark(kind: int, line: int) -> str:
            return _MARKERS.marker(kind, TemplateLine(filename, line, lines[line - 1] if line <= len(lines) else ""))

        for output in list(tree.find_all(nodes.Output)):
            marked: list[nodes.Expr] = []
            for child in output.nodes:
                if isinstance(child, nodes.TemplateData):  # its text starts at its lineno
                    parts = child.data.split("\n")
                    child.data = "\n".join(mark(_Markers.DATA, child.lineno + i) + part if part.strip() else part
                                           for i, part in enumerate(parts))  # fmt: skip
                    marked.append(child)
                else:
                    call = isinstance(child, nodes.Call) or child.find(nodes.Call) is not None
                    start = mark(_Markers.CALL if call else _Markers.VALUE, child.lineno)
                    marked += [nodes.TemplateData(start, lineno=child.lineno), child,
                               nodes.TemplateData(_Markers.END, lineno=child.lineno)]  # fmt: skip
            output.nodes = marked
        return tree


@cache
def environment(directory: Path | None = None, marking: bool = False) -> jinja2.Environment:
    """The shared templates under their reserved prefix, then (for a kernel body) its spec's directory; `marking`:
    the same templates compiled with markers (template_lines)."""
    shared = jinja2.PrefixLoader({SHARED_PREFIX.rstrip("/"): ScopedLoader(resources.templates())})
    loader = shared if directory is None else jinja2.ChoiceLoader([shared, ScopedLoader(directory)])
    kind = _MarkingEnvironment if marking else SandboxedEnvironment
    return kind(loader=loader, undefined=jinja2.StrictUndefined, keep_trailing_newline=False, autoescape=False)


def _template_error(err: jinja2.TemplateError, where: str) -> SpecError:
    """A Jinja error in template terms: the template file and line, from the error or the template's frames."""
    filename, line = getattr(err, "filename", None), getattr(err, "lineno", None)
    if filename is None:
        tb = sys.exc_info()[2]
        while tb is not None:
            name = tb.tb_frame.f_code.co_filename
            if name.endswith(".j2"):
                filename, line = name, tb.tb_lineno
            tb = tb.tb_next
    place = f"{filename}:{line}" if filename else where
    return SpecError(f"{place}: {type(err).__name__}: {err.message or err}")


def _render(template: str, directory: Path | None = None, **context: object) -> str:
    marking = _MARKING.get()
    try:
        text = environment(directory, marking).get_template(template).render(version=__version__, **context)
    except jinja2.TemplateError as err:
        raise _template_error(err, template) from None
    return (_strip_marked(text) if marking else text.strip()) + "\n"


def _strip_marked(text: str) -> str:
    """str.strip of the text without its markers, keeping the markers: an expression's start or end may lie in the
    whitespace stripped."""
    head = _Markers.BLANK.match(text).end()
    tail = max(head, len(text) - _Markers.BLANK.match(text[::-1]).end())
    return "".join(_Markers.PATTERN.findall(text[:head] + text[tail:])) + text[head:tail]


def _params(spec: KernelSpec, dtype: str | None, param: str | None = None) -> str:
    """Rust parameter text, `name: type` joined by ", "; generic in D (and P) when dtype is None."""
    return ", ".join(f"{a.name}: {a.generic if dtype is None else a.concrete(dtype, param)}" for a in spec.args)


def _template_state(directory: Path | None) -> tuple[tuple[str, int, int], ...]:
    """Every file a render may read (the shared templates, and a kernel body's spec directory) as (path, size,
    modification time): a memoised render holds while this is unchanged."""
    state: list[tuple[str, int, int]] = []
    folders = [str(resources.templates())] if directory is None else [str(resources.templates()), str(directory)]
    while folders:
        with os.scandir(folders.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):  # a linked folder's files are reached where they lie, if at all
                    folders.append(entry.path)
                    continue
                try:
                    st = entry.stat()
                except OSError:  # a dangling link: nothing to read
                    continue
                state.append((entry.path, st.st_size, st.st_mtime_ns))
    return tuple(state)


def kernel_source(spec: KernelSpec, dtype_key: str, param: str, consts: dict[str, int]) -> str:
    """The kernel function of one instance: generic in the dtype D (and P) and in the spec's consts, its body
    rendered with the instance's dtype key ("bf16-f32"), parameter dtype, D's bytes (`storage_bytes`: a 16-byte pack
    holds 16 / storage_bytes lanes) and consts in the context."""
    state = _template_state(spec.directory)
    return _kernel_source(spec, dtype_key, param, tuple(consts.items()), _MARKING.get(), state)


# The memoised renders' arguments after the instance's are the key's alone: a marked render (template_lines) differs
# from a plain one, and an edited template renders anew. A few hundred instances' sources (about 40 KB each) at most.
@lru_cache(maxsize=512)
def _kernel_source(spec: KernelSpec, dtype_key: str, param: str, consts: tuple[tuple[str, int], ...], marking: bool,
                   state: tuple[tuple[str, int, int], ...]) -> str:  # fmt: skip
    source = _render(f"{SHARED_PREFIX}kernel.rs.j2", spec.directory, spec=spec, params_generic=_params(spec, None),
                     dtype=dtype_key, param=param, storage_bytes=DTYPES[activations(dtype_key)].size,
                     **dict(consts))  # fmt: skip
    read = FILE_READS.search(source)
    if read:
        raise SpecError(f"{spec.directory / spec.template}: the generated kernel reads a file at build time "
                        f"({read.group(0)!r}): everything a kernel uses must come from its templates")  # fmt: skip
    return source


def entry_point_source(spec: KernelSpec, dtype: str, param: str, const_values: tuple[int, ...]) -> str:
    """The `#[kernel] #[no_mangle] extern "C"` wrapper of one instance."""
    return _entry_point_source(spec, dtype, param, const_values, _MARKING.get(), _template_state(None))


@lru_cache(maxsize=512)
def _entry_point_source(spec: KernelSpec, dtype: str, param: str, const_values: tuple[int, ...], marking: bool,
                        state: tuple[tuple[str, int, int], ...]) -> str:  # fmt: skip
    return _render(
        f"{SHARED_PREFIX}entry_point.rs.j2",
        spec=spec,
        entry_point=f"{spec.name}_entry_point",
        params_concrete=_params(spec, dtype, param),
        dtype={"rust": dtype},
        param={"rust": param} if spec.has_param else None,
        const_values=[str(v) for v in const_values],
        arg_names=[a.name for a in spec.args],
    )


# The crate templates, per target: "ptx" builds the kernel for nvptx64, "host" as a library for the CPU emulator.
CRATE_TEMPLATES = {"Cargo.toml": "crate_Cargo.toml.j2", "lib.rs": "crate_lib.rs.j2"}


def crate_files(kernel: Kernel, package: str, target: str) -> dict[str, str]:
    """The files of the standalone crate that builds one kernel instance for `target` ("ptx" or "host")."""
    context = {
        "kernel_id": kernel.id,
        "package": package,
        "cuda_std": resources.cuda_std().as_posix(),
        "target": target,
        "entry_point": kernel.entry_point_name(),
    }
    files = {
        name: _render(SHARED_PREFIX + template, **context)
        for name, template in CRATE_TEMPLATES.items()
        if name != "lib.rs"
    }
    files["lib.rs"] = _render(SHARED_PREFIX + CRATE_TEMPLATES["lib.rs"], source=kernel.source, **context)
    return files


def template_lines(kernel: Kernel, package: str, target: str, generated: str) -> list[Origin | None] | None:
    """The origin of each line of `generated` (the kernel's lib.rs from crate_files; None for a line with none, a
    blank one): the crate rendered again with markers, which must then read as `generated` line for line, else None
    (a template that inspects its own output, say) rather than a wrong map. Trailing whitespace may differ: Jinja's
    indent filter indents a blank line that holds a marker, and whitespace moves no line."""
    fresh = type(kernel)(*kernel.const_values, dtype=kernel.dtype, param_dtype=kernel.param_dtype)  # uncached source
    marking = _MARKING.set(True)
    try:
        marked = crate_files(fresh, package, target)["lib.rs"]
    except (SpecError, _Unmapped):  # a template edited since the build, too many lines to mark
        return None
    finally:
        _MARKING.reset(marking)
    same = _rstripped(_Markers.PATTERN.sub("", marked)) == _rstripped(generated)
    return _read_markers(marked) if same else None


def _rstripped(text: str) -> list[str]:
    return [line.rstrip() for line in text.split("\n")]


def _read_markers(marked: str) -> list[Origin | None]:
    """Each line's origin: the last mark before its first non-blank character (the innermost template's), else the
    innermost expression whose output it continues; with the macro calls open there."""
    expressions: list[tuple[int, TemplateLine]] = []  # those whose output is being read, outermost first
    origins: list[Origin | None] = []
    for line in marked.split("\n"):
        origin = _origin(expressions[-1][1], expressions[:-1]) if expressions else None
        content, end = False, 0
        for found in _Markers.PATTERN.finditer(line):
            content, end = content or bool(line[end : found.start()].strip()), found.end()
            if found.group() == _Markers.END:
                del expressions[-1:]
                continue
            kind, where = _MARKERS.read(found.group())
            origin = origin if content else _origin(where, expressions)
            if kind != _Markers.DATA:
                expressions.append((kind, where))
        origins.append(origin)
    return origins


def _origin(where: TemplateLine, expressions: list[tuple[int, TemplateLine]]) -> Origin:
    return Origin(where, tuple(line for kind, line in reversed(expressions) if kind == _Markers.CALL))
