"""BatchNorm2d: the eval forward and backward (frozen running statistics) and training mode (batch statistics),
over NCHW and channels_last. Specs and templates in codegen/batch_norm/; the ops and their NCHW eval plans in
forward.py and backward.py, the channels_last eval plans in frozen.py, the training plans in training.py,
BatchNorm2d with its activation fused in activation.py, with the residual add and ReLU fused in residual.py, both
in eval mode in frozen_fused.py, SyncBatchNorm's per-rank ops in sync.py; what verifies them in verify.py,
verify_frozen.py, verify_frozen_fused.py, verify_training.py, verify_activation.py and verify_residual.py; what
benchmarks them in rust_kernels.bench.baselines.batch_norm."""

from rust_kernels.families.batch_norm import (
    activation,
    backward,
    forward,
    frozen,
    frozen_fused,
    residual,
    sync,
    training,
    verify,
    verify_activation,
    verify_frozen,
    verify_frozen_fused,
    verify_residual,
    verify_training,
)
from rust_kernels.registry import register

register(*forward.OPS, *backward.OPS, *activation.OPS, *residual.OPS, *frozen_fused.OPS, *sync.OPS, *verify.FAMILIES,
         *verify_training.FAMILIES, *verify_activation.FAMILIES, *verify_residual.FAMILIES,
         *verify_frozen.FAMILIES, *verify_frozen_fused.FAMILIES)  # fmt: skip

__all__ = [
    "activation",
    "backward",
    "forward",
    "frozen",
    "frozen_fused",
    "residual",
    "sync",
    "training",
    "verify",
    "verify_activation",
    "verify_frozen",
    "verify_frozen_fused",
    "verify_residual",
    "verify_training",
]
