"""The channels_last eval forwards' rule (frozen.forward_grid: at least frozen.RULE_UNITS units a thread past one
wave) against the training normalize's grid they took before, on the H200, from the shipped table: its timings of both
grids on every suite key that has them (the kernels without packed coefficients), for the eval forward, the eval
forward with ReLU fused and the one with the residual add and ReLU. Needs no GPU.

    python rule_from_table.py
"""

import math
import statistics

import ml_dtypes
import numpy as np
from numpy.lib.stride_tricks import as_strided

from rust_kernels import ops, tuning
from rust_kernels.bench import suite
from rust_kernels.families.batch_norm import training
from rust_kernels.runtime import Placement

H200 = tuning.Gpu("NVIDIA H200", 132, "sm_90", 60 << 20)
PLACEMENT = Placement(16, 132)
STORAGE = {"f32": np.float32, "bf16": ml_dtypes.bfloat16}
# (op, its [B, C, H, W] inputs, scalars by name)
OPS = [("batch_norm_2d_forward", "x", {"training": False}),
       ("batch_norm_2d_act_eval_forward", "x", {"activation": "relu"}),
       ("batch_norm_2d_add_relu_eval_forward", "x residual", {})]  # fmt: skip


def times(op, big, scalars, shape, dtype):
    """{CTAS: µs} of the op's candidates the table holds for this key, and the rule's CTAS."""
    _, c, h, w = shape
    e = np.dtype(STORAGE[dtype]).itemsize
    x = as_strided(np.zeros(1, STORAGE[dtype]), shape, (h * w * c * e, e, w * c * e, c * e))  # NHWC; never read
    arrays = tuple(x if i.name in big.split() else np.zeros(c, np.float32) for i in op.inputs)
    _, problem = op.problem(arrays, tuple(scalars.get(s.name, s.default) for s in op.scalars), "host")
    key, names, table = tuning.key(problem, PLACEMENT, H200), {}, tuning.shipped(H200.slug)
    plans = op.candidates(problem, PLACEMENT)
    out = {}
    for plan in plans:
        entry = table.get(tuning.entry_name(key, plan, "sm_90", names))
        if entry is not None and entry.us is not None:
            out[plan.value("CTAS")] = entry.us
    return out, plans[0].value("CTAS"), plans[0].kernel.vectorized


def main() -> None:
    for name, big, scalars in OPS:
        op = getattr(ops, name).op
        gains, worse, missing = [], [], 0
        for shape in suite.shapes("batch_norm_2d"):
            if shape[1] == 1 or shape[2] * shape[3] == 1:  # NCHW memory: the ops take the NCHW kernels
                continue
            for dtype in STORAGE:
                us, now, vectorized = times(op, big, scalars, shape, dtype)
                before = training.elementwise_grid(shape, dtype, vectorized, True, 132)
                if before not in us or now not in us:
                    missing += 1
                    continue
                gains.append(us[before] / us[now])
                mb = 2 * math.prod(shape) * np.dtype(STORAGE[dtype]).itemsize / 1e6
                if gains[-1] < 0.97:
                    worse.append(
                        f"  {dtype} {'x'.join(map(str, shape))} ({mb:.1f} MB): {us[before]:.2f} -> {us[now]:.2f} µs"
                    )
        faster = [g for g in gains if g > 1.03]
        print(
            f"{name}: {len(gains)} keys ({missing} lack a time of either grid); before / now: min {min(gains):.3f}, "
            f"median {statistics.median(gains):.3f}, max {max(gains):.3f}; more than 3% faster on {len(faster)} "
            f"(median {statistics.median(faster):.3f}), more than 3% slower on {len(worse)}:"
        )
        print("\n".join(worse))


if __name__ == "__main__":
    main()
