"""BatchNorm2d over NCHW with frozen running statistics: the eval forward and backward (specs and templates in
codegen/batch_norm/)."""

from rust_kernels.families.batch_norm import backward, forward

__all__ = ["backward", "forward"]
