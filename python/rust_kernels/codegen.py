"""Rendering: spec + Jinja2 templates -> Rust source (kernel body and entry point) and the kernel crates built from
it. Everything that turns a spec into Rust text lives here.

Templates render in a sandboxed Jinja2 environment (no attribute walks to Python internals), each loader scoped to
its directory (a name or a symlink that resolves outside it is not found). A kernel's own templates are its spec's
directory; the package's shared ones (entry point, crates, reductions) are reachable only under the reserved prefix
`rust_kernels/` (`{% from "rust_kernels/reduce.rs.j2" import block_sum %}`), which no user template can shadow. A
kernel body is rendered per instance: it sees `spec`, `dtype` (the dtype key, "bf16-f32"), `param` and every const
by name. Template errors are SpecErrors naming the template file and line; generated Rust may not read files at
build time (`include!`, `include_str!`, `include_bytes!`, `#[path]`): they would escape the kernel's directory and
its cache key.
"""

from __future__ import annotations

import re
import sys
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from rust_kernels import resources
from rust_kernels.errors import SpecError
from rust_kernels.spec import SHARED_PREFIX, KernelSpec
from rust_kernels.version import __version__

if TYPE_CHECKING:
    from rust_kernels.kernels import Kernel

FILE_READS = re.compile(r"\binclude(?:_str|_bytes)?\s*!|#\s*\[\s*path\b")


class ScopedLoader(jinja2.FileSystemLoader):
    """One directory's templates and nothing outside it: a name that resolves elsewhere (`..`, a symlink) is refused."""

    def get_source(self, environment: jinja2.Environment, template: str) -> tuple[str, str, Any]:
        source, filename, uptodate = super().get_source(environment, template)
        root = Path(self.searchpath[0]).resolve()
        if not Path(filename).resolve().is_relative_to(root):
            raise jinja2.TemplateNotFound(f"{template} (it resolves to {Path(filename).resolve()}, outside {root})")
        return source, filename, uptodate


@cache
def environment(directory: Path | None = None) -> jinja2.Environment:
    """The shared templates under their reserved prefix, then (for a kernel body) its spec's directory."""
    shared = jinja2.PrefixLoader({SHARED_PREFIX.rstrip("/"): ScopedLoader(resources.templates())})
    loader = shared if directory is None else jinja2.ChoiceLoader([shared, ScopedLoader(directory)])
    return SandboxedEnvironment(loader=loader, undefined=jinja2.StrictUndefined, keep_trailing_newline=False,
                                autoescape=False)  # fmt: skip


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
    try:
        text = environment(directory).get_template(template).render(version=__version__, **context)
    except jinja2.TemplateError as err:
        raise _template_error(err, template) from None
    return text.strip() + "\n"


def _params(spec: KernelSpec, dtype: str | None, param: str | None = None) -> str:
    """Rust parameter text, `name: type` joined by ", "; generic in D (and P) when dtype is None."""
    return ", ".join(f"{a.name}: {a.generic if dtype is None else a.concrete(dtype, param)}" for a in spec.args)


def kernel_source(spec: KernelSpec, dtype_key: str, param: str, consts: dict[str, int]) -> str:
    """The kernel function of one instance: generic in the dtype D (and P) and in the spec's consts, its body
    rendered with the instance's dtype key ("bf16-f32"), parameter dtype and consts in the context."""
    source = _render(f"{SHARED_PREFIX}kernel.rs.j2", spec.directory, spec=spec, params_generic=_params(spec, None),
                     dtype=dtype_key, param=param, **consts)  # fmt: skip
    read = FILE_READS.search(source)
    if read:
        raise SpecError(f"{spec.directory / spec.template}: the generated kernel reads a file at build time "
                        f"({read.group(0)!r}): everything a kernel uses must come from its templates")  # fmt: skip
    return source


def entry_point_source(spec: KernelSpec, dtype: str, param: str, const_values: tuple[int, ...]) -> str:
    """The `#[kernel] #[no_mangle] extern "C"` wrapper of one instance."""
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
