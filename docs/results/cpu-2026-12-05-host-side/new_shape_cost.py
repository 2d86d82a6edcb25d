"""Host time to decide a new shape's plan, as the runtime does on a signature miss, without a GPU: the training
BatchNorm ops' candidate plans and their tuning-table entry names (what rendering each candidate's kernel source
was for) over ResNet-50's BN shapes, per (op, shape), for a first batch size and for new batch sizes after it.
Usage: PYTHONPATH=python python3 docs/results/cpu-2026-12-05-host-side/new_shape_cost.py"""

import time

import ml_dtypes
import numpy as np

from rust_kernels import tuning
from rust_kernels.families.batch_norm import backward, forward
from rust_kernels.runtime import Placement

CHANNELS_HW = [(64, 112, 112), (64, 56, 56), (256, 56, 56), (128, 56, 56), (128, 28, 28), (512, 28, 28),
               (256, 28, 28), (256, 14, 14), (1024, 14, 14), (512, 14, 14), (512, 7, 7), (2048, 7, 7)]  # fmt: skip
PLACEMENT = Placement(16, 132)
H200 = tuning.Gpu("NVIDIA H200", 132, "sm_90", 60 << 20)


def x_like(shape: tuple[int, ...], channels_last: bool) -> np.ndarray:
    """A bf16 array of `shape` in either memory format (its values are never read)."""
    b, c, h, w = shape
    strides = (c * h * w, 1, w * c, c) if channels_last else (c * h * w, h * w, w, 1)
    flat = np.empty(b * c * h * w, dtype=ml_dtypes.bfloat16)
    return np.lib.stride_tricks.as_strided(flat, shape, tuple(2 * s for s in strides))


def ms_per_op_and_shape(batch: int, channels_last: bool) -> float:
    start, n = time.perf_counter(), 0
    for c, h, w in CHANNELS_HW:
        x = x_like((batch, c, h, w), channels_last)
        vectors = [np.zeros(c, np.float32) for _ in range(5)]
        for op, arrays, scalars in ((forward.NATIVE, (x, *vectors[:4]), (True, 0.1, 1e-5)),
                                    (backward.NATIVE, (x, x, *vectors), (True, 1e-5, True))):  # fmt: skip
            problem = op.problem(arrays, scalars, "host")[1]
            candidates, keys = op.candidates(problem, PLACEMENT), {}
            key = tuning.key(problem, PLACEMENT, H200)
            for plan in candidates:
                tuning.entry_name(key, plan, "sm_90", keys)
            n += 1
    return (time.perf_counter() - start) / n * 1e3


for layout in (False, True):
    first = ms_per_op_and_shape(128, layout)
    again = [ms_per_op_and_shape(b, layout) for b in (64, 32, 16)]
    print(f"{'channels_last' if layout else 'NCHW'}: ms per (op, new shape): batch 128 first {first:.2f}, "
          f"then batches 64, 32, 16: {', '.join(f'{t:.2f}' for t in again)}")  # fmt: skip
