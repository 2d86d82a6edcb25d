"""The channels_last eval forwards' rule (frozen.forward_grid: at least frozen.RULE_UNITS units a thread past one
wave) against the training normalize's grid they took before, on the H200, from the shipped table: its timings of both
grids on every suite key that has them (the kernels without packed coefficients), for the eval forward, the eval
forward with ReLU fused and the one with the residual add and ReLU. Needs no GPU.

    python rule_from_table.py
"""

import math
import statistics

import numpy as np
from table_times import STORAGE, candidates_and_times

from rust_kernels import ops
from rust_kernels.bench import suite
from rust_kernels.families.batch_norm import training

# (op, its [B, C, H, W] inputs, scalars by name)
OPS = [("batch_norm_2d_forward", "x", {"training": False}),
       ("batch_norm_2d_act_eval_forward", "x", {"activation": "relu"}),
       ("batch_norm_2d_add_relu_eval_forward", "x residual", {})]  # fmt: skip


def main() -> None:
    for name, big, scalars in OPS:
        op = getattr(ops, name).op
        gains, worse, missing = [], [], 0
        for shape in suite.shapes("batch_norm_2d"):
            if shape[1] == 1 or shape[2] * shape[3] == 1:  # NCHW memory: the ops take the NCHW kernels
                continue
            for dtype in STORAGE:
                plans, times = candidates_and_times(op, big, scalars, shape, dtype, True)
                us = {plan.value("CTAS"): t for plan, t in times.items()}
                now, vectorized = plans[0].value("CTAS"), plans[0].kernel.vectorized
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
