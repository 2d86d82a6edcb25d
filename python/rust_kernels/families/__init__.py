"""The package's kernel families, one sub-package each (its specs and templates are in codegen/<name>/). Each
registers its Family objects with rust_kernels.registry when imported."""
