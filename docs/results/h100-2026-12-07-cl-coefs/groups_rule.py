"""The training rule's GROUPS reductions over the NCHW one-launch kernels (training.groups_rule: 16-bit rows that no
pack divides, from training.GROUPS_RULE_BYTES of x on) against the rule without them, on the H200, from the shipped
table: every suite key of the training forward ops (NCHW, f32 and bf16 with f32 parameters, with and without a fused
ReLU) whose rule changed, both plans' times and the best candidate's; or, with --table, the times of a `tune
--export` file (measured on the GPU it names). Needs no GPU. groups_rule.txt, written at e30f7fb, also has the
backward ops, whose rule took GROUPS from 6.5 MiB until the FLAT rule replaced it
(../h100-2026-12-07-rules/rule_changes.py). Both sides leave out FUSED_UNPACKED_BYTES, which came after.

    python groups_rule.py [--table EXPORT]
"""

import math
import statistics
from unittest import mock

import numpy as np
from table_times import STORAGE, candidates_and_times, clear, table_argument

from rust_kernels import ops
from rust_kernels.bench import suite
from rust_kernels.families.batch_norm import training

# (op, its [B, C, H, W] inputs, scalars by name)
OPS = [("batch_norm_2d_forward", "x", {"training": True}), ("batch_norm_2d_act_forward", "x", {"activation": "relu"})]


def main() -> None:
    table_argument(__doc__)
    for name, big, scalars in OPS:
        op = getattr(ops, name).op
        gains, lines, missing = [], [], 0
        for shape in suite.shapes("batch_norm_2d"):
            for dtype in STORAGE:
                with mock.patch.object(training, "FUSED_UNPACKED_BYTES", math.inf):  # the rule of e30f7fb
                    clear()
                    (now, *_), times = candidates_and_times(op, big, scalars, shape, dtype, False)
                    with mock.patch.object(training, "GROUPS_RULE_BYTES", math.inf):
                        clear()
                        (before, *_), _ = candidates_and_times(op, big, scalars, shape, dtype, False)
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
