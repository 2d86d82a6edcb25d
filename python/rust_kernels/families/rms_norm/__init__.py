"""RMSNorm forward over the last dimension of a 2-D [rows, cols] x: y = x * rsqrt(mean(x^2) + eps) * weight. Specs
and templates in codegen/rms_norm/; the op and its plans in forward.py; what verifies it in verify.py; what
benchmarks it in rust_kernels.bench.baselines.rms_norm. Nothing generic names this family: it is found and
registered like any other."""

from rust_kernels.families.rms_norm import forward, verify
from rust_kernels.registry import register

register(*forward.OPS, *verify.FAMILIES)

__all__ = ["forward", "verify"]
