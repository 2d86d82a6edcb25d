"""Where the package's own sources are: the kernel specs and templates (codegen/), the device-support crates and the
lock file (rust_kernels/), and prebuilt kernels.

From a source checkout (editable install or PYTHONPATH=python) they are read from the repository itself, so an edit
takes effect at once. An installed wheel or sdist build carries copies inside the package, under `_data/` (put
there by the extension's build script, rust_kernels/host/build.rs), read through importlib.resources.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


@cache
def root() -> Path:
    """The directory holding codegen/ and rust_kernels/: the repository, or the package's _data copy."""
    repository = PACKAGE.parents[1]
    if (repository / "codegen" / "templates").is_dir() and (repository / "rust_kernels" / "cuda_std").is_dir():
        return repository
    data = Path(str(resources.files("rust_kernels") / "_data"))
    if not (data / "codegen" / "templates").is_dir():
        raise FileNotFoundError(
            f"rust_kernels: neither a source checkout ({repository}) nor the packaged sources ({data}) were found; "
            "reinstall the package"
        )
    return data


def codegen() -> Path:
    return root() / "codegen"


def templates() -> Path:
    """Templates every kernel may use: the entry point, the crate files, reduction macros."""
    return codegen() / "templates"


def workspace() -> Path:
    return root() / "rust_kernels"


def cuda_std() -> Path:
    return workspace() / "cuda_std"


def cuda_std_macros() -> Path:
    return workspace() / "cuda_std_macros"


def cargo_lock() -> Path:
    return workspace() / "Cargo.lock"


def ptx_linker() -> Path:
    return PACKAGE / "ptx_linker.py"


def prebuilt() -> Path:
    """A read-only cache of prebuilt kernels shipped in the wheel (empty in a checkout unless built there)."""
    return PACKAGE / "_prebuilt"
