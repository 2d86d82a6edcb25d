"""BatchNorm2d over NCHW with frozen running statistics: the eval forward and backward. Specs and templates in
codegen/batch_norm/; the ops and their plans in forward.py and backward.py; what verifies them in verify.py; what
benchmarks them in rust_kernels.bench.baselines.batch_norm."""

from rust_kernels.families.batch_norm import backward, forward, verify
from rust_kernels.registry import register

register(*forward.OPS, *backward.OPS, *verify.FAMILIES)

__all__ = ["backward", "forward", "verify"]
