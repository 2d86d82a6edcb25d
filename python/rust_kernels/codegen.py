"""Rendering: spec + Jinja2 templates -> Rust source (kernel body and entry point) and the kernel crates built from
it. Everything that turns a spec into Rust text lives here."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import jinja2

from rust_kernels import resources
from rust_kernels.spec import KernelSpec
from rust_kernels.version import __version__

if TYPE_CHECKING:
    from rust_kernels.kernels import Kernel


@cache
def environment(directory: Path | None = None) -> jinja2.Environment:
    """Templates of a spec directory (the kernel bodies) over the shared ones (entry point, crates, reductions)."""
    search = [resources.templates()] if directory is None else [directory, resources.templates()]
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(search),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
        autoescape=False,
    )


def _render(template: str, directory: Path | None = None, **context: object) -> str:
    return environment(directory).get_template(template).render(version=__version__, **context).strip() + "\n"


def _params(spec: KernelSpec, dtype: str | None, param: str | None = None) -> str:
    """Rust parameter text, `name: type` joined by ", "; generic in D (and P) when dtype is None."""
    return ", ".join(f"{a.name}: {a.generic if dtype is None else a.concrete(dtype, param)}" for a in spec.args)


@cache
def kernel_source(spec: KernelSpec) -> str:
    """The kernel function: generic in the dtype D and in the spec's consts."""
    return _render("kernel.rs.j2", spec.directory, spec=spec, params_generic=_params(spec, None))


def entry_point_source(spec: KernelSpec, dtype: str, param: str, const_values: tuple[int, ...]) -> str:
    """The `#[kernel] #[no_mangle] extern "C"` wrapper of one instance."""
    return _render(
        "entry_point.rs.j2",
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
    files = {name: _render(template, **context) for name, template in CRATE_TEMPLATES.items() if name != "lib.rs"}
    files["lib.rs"] = _render(CRATE_TEMPLATES["lib.rs"], source=kernel.source, **context)
    return files
