"""The channels_last eval forward's rule (frozen.forward: at least frozen.RULE_UNITS units a thread past one wave)
against the training normalize's grid it took before, on the H200, from the shipped table: its timings of both grids
on every suite key that has them (the kernel without packed coefficients; 12-02's tunes timed them). Needs no GPU.

    python rule_from_table.py
"""

import math
import statistics

import ml_dtypes
import numpy as np
from numpy.lib.stride_tricks import as_strided

from rust_kernels import tuning
from rust_kernels.bench import suite
from rust_kernels.families.batch_norm import forward, frozen, training
from rust_kernels.runtime import Placement

H200 = tuning.Gpu("NVIDIA H200", 132, "sm_90", 60 << 20)
PLACEMENT = Placement(16, 132)
STORAGE = {"f32": np.float32, "bf16": ml_dtypes.bfloat16}


def times(shape, dtype):
    """{CTAS: µs} of the forward's candidates the table holds for this key."""
    _, c, h, w = shape
    e = np.dtype(STORAGE[dtype]).itemsize
    x = as_strided(np.zeros(1, STORAGE[dtype]), shape, (h * w * c * e, e, w * c * e, c * e))  # NHWC; never read
    _, problem = forward.NATIVE.problem((x, *(np.zeros(c, np.float32) for _ in range(4))), (False, 0.0, 1e-5), "host")
    key, names, table = tuning.key(problem, PLACEMENT, H200), {}, tuning.shipped(H200.slug)
    out = {}
    for plan in forward.NATIVE.candidates(problem, PLACEMENT):
        entry = table.get(tuning.entry_name(key, plan, "sm_90", names))
        if entry is not None and entry.us is not None:
            out[plan.value("CTAS")] = entry.us
    return out


def main() -> None:
    gains, worse, missing = [], [], 0
    for shape in suite.shapes("batch_norm_2d"):
        if shape[1] == 1 or shape[2] * shape[3] == 1:  # NCHW memory: the op takes the NCHW kernels
            continue
        for dtype in STORAGE:
            us = times(shape, dtype)
            vectorized = training.vector_mode(shape, dtype, 16, True)
            before = training.elementwise_grid(shape, dtype, vectorized, True, 132)
            now = frozen.plan("forward", shape, dtype, "f32", 16, 132).value("CTAS")
            if before not in us or now not in us:
                missing += 1
                continue
            gains.append(us[before] / us[now])
            mb = 2 * math.prod(shape) * np.dtype(STORAGE[dtype]).itemsize / 1e6
            if gains[-1] < 0.97:
                worse.append(f"{dtype} {'x'.join(map(str, shape))} ({mb:.1f} MB): {us[before]:.2f} -> {us[now]:.2f} µs")
    faster = [g for g in gains if g > 1.03]
    print(f"{len(gains)} keys ({missing} lack a time of either grid); before / now: min {min(gains):.3f}, median "
          f"{statistics.median(gains):.3f}, max {max(gains):.3f}; more than 3% faster on {len(faster)} (median "
          f"{statistics.median(faster):.3f}), more than 3% slower on {len(worse)}:")
    print("\n".join(worse))


if __name__ == "__main__":
    main()
