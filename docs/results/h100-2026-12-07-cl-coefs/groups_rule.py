"""The training rule's GROUPS reductions over the NCHW one-launch kernels (training.groups_rule: 16-bit rows that no
pack divides, from training.GROUPS_RULE_BYTES of x on) against the rule without them, on the H200, from the shipped
table: every suite key of the training ops (NCHW, f32 and bf16 with f32 parameters, with and without a fused ReLU)
whose rule changed, both plans' times and the best candidate's. Needs no GPU.

    python groups_rule.py
"""

import math
import statistics
from unittest import mock

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
OPS = [("batch_norm_2d_forward", "x", {"training": True}), ("batch_norm_2d_backward", "dy x", {"training": True}),
       ("batch_norm_2d_act_forward", "x", {"activation": "relu"}),
       ("batch_norm_2d_act_backward", "dy x", {"activation": "relu"})]  # fmt: skip


def rule_and_times(op, big, scalars, shape, dtype):
    """The rule's plan and {plan: µs} of the candidates the table holds for this NCHW key."""
    _, c, h, w = shape
    e = np.dtype(STORAGE[dtype]).itemsize
    x = as_strided(np.zeros(1, STORAGE[dtype]), shape, (c * h * w * e, h * w * e, w * e, e))  # never read
    arrays = tuple(x if i.name in big.split() else np.zeros(c, np.float32) for i in op.inputs)
    _, problem = op.problem(arrays, tuple(scalars.get(s.name, s.default) for s in op.scalars), "host")
    key, names, table = tuning.key(problem, PLACEMENT, H200), {}, tuning.shipped(H200.slug)
    plans = op.candidates(problem, PLACEMENT)
    times = {}
    for plan in plans:
        entry = table.get(tuning.entry_name(key, plan, "sm_90", names))
        if entry is not None and entry.us is not None:
            times[plan] = entry.us
    return plans[0], times


def clear() -> None:
    training.plan.cache_clear()
    training._candidates.cache_clear()


def main() -> None:
    for name, big, scalars in OPS:
        op = getattr(ops, name).op
        gains, lines, missing = [], [], 0
        for shape in suite.shapes("batch_norm_2d"):
            for dtype in STORAGE:
                clear()
                now, times = rule_and_times(op, big, scalars, shape, dtype)
                with mock.patch.dict(training.GROUPS_RULE_BYTES, {"forward": math.inf, "backward": math.inf}):
                    clear()
                    before, _ = rule_and_times(op, big, scalars, shape, dtype)
                if now == before:
                    continue
                if now not in times or before not in times:
                    missing += 1
                    continue
                gains.append(times[before] / times[now])
                mb = math.prod(shape) * np.dtype(STORAGE[dtype]).itemsize / 1e6
                best = min(times.values())
                lines.append(f"  {dtype} {'x'.join(map(str, shape))} ({mb:.1f} MB of x): {times[before]:.2f} -> "
                             f"{times[now]:.2f} µs ({gains[-1]:.2f}x; best candidate {best:.2f})")  # fmt: skip
        clear()
        middle = statistics.median(gains) if gains else 0
        summary = f"min {min(gains):.2f}x, median {middle:.2f}x, max {max(gains):.2f}x" if gains else ""
        print(f"{name}: the rule changed on {len(gains) + missing} keys ({missing} lack a time); {summary}")
        print("\n".join(lines))


if __name__ == "__main__":
    main()
