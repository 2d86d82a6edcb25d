"""Rendering: spec + Jinja2 templates -> Rust source (kernel body and entry point), kernel crates and the host
catalogue. Everything that turns a spec into Rust text lives here."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

import jinja2

from rust_kernels.paths import TEMPLATES
from rust_kernels.spec import KernelSpec
from rust_kernels.version import __version__

if TYPE_CHECKING:
    from rust_kernels.kernels import Kernel


@cache
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
        autoescape=False,
    )


def _render(template: str, **context: object) -> str:
    return environment().get_template(template).render(version=__version__, **context).strip() + "\n"


def _params(spec: KernelSpec, dtype: str | None) -> str:
    """Rust parameter text, `name: type` joined by ", "; generic in D when dtype is None."""
    return ", ".join(f"{a.name}: {a.generic if dtype is None else a.concrete(dtype)}" for a in spec.args)


@cache
def kernel_source(spec: KernelSpec) -> str:
    """The kernel function: generic in the dtype D and in the spec's consts."""
    return _render("kernel.rs.j2", spec=spec, params_generic=_params(spec, None))


def entry_point_source(spec: KernelSpec, dtype: str, const_values: tuple[int, ...]) -> str:
    """The `#[kernel] #[no_mangle] extern "C"` wrapper of one instance."""
    return _render(
        "entry_point.rs.j2",
        spec=spec,
        entry_point=f"{spec.name}_entry_point",
        params_concrete=_params(spec, dtype),
        dtype={"rust": dtype},
        const_values=[str(v) for v in const_values],
        arg_names=[a.name for a in spec.args],
    )


def crate_files(kernel: Kernel, package: str) -> dict[str, str]:
    """The files of the standalone crate that builds one kernel instance to PTX."""
    from rust_kernels.paths import CUDA_STD

    context = {"kernel_id": kernel.id, "package": package, "cuda_std": CUDA_STD.as_posix()}
    return {
        "Cargo.toml": _render("crate_Cargo.toml.j2", **context),
        "lib.rs": _render("crate_lib.rs.j2", source=kernel.source, **context),
    }


def host_catalogue(kernels: list[Kernel]) -> str:
    """The Rust module the host extension compiles: one module per kernel instance holding its `source`."""
    return _render("host_catalogue.rs.j2", kernels=kernels)
