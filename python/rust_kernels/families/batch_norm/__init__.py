"""BatchNorm2d: the eval forward and backward over NCHW (frozen running statistics), and training mode (batch
statistics) over NCHW and channels_last. Specs and templates in codegen/batch_norm/; the ops and their eval plans in
forward.py and backward.py, the training plans in training.py; what verifies them in verify.py and
verify_training.py; what benchmarks them in rust_kernels.bench.baselines.batch_norm."""

from rust_kernels.families.batch_norm import backward, forward, training, verify, verify_training
from rust_kernels.registry import register

register(*forward.OPS, *backward.OPS, *verify.FAMILIES, *verify_training.FAMILIES)

__all__ = ["backward", "forward", "training", "verify", "verify_training"]
