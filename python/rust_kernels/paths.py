"""Where the source tree's parts are. The package runs from the repository (editable install or PYTHONPATH=python):
templates, specs and the device-support crate are read from there."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
ROOT = PACKAGE.parents[1]
CODEGEN = ROOT / "codegen"
SPECS = CODEGEN / "specs"
TEMPLATES = CODEGEN / "templates"
WORKSPACE = ROOT / "rust_kernels"
CUDA_STD = WORKSPACE / "cuda_std"
CUDA_STD_MACROS = WORKSPACE / "cuda_std_macros"
PTX_LINKER = PACKAGE / "ptx_linker.py"
