"""The NCHW training rule's changes of 12-07 (training.unpacked_rows: the backward's masked-pack FLAT reductions from
FLAT_RULE_BYTES, and no one-launch kernel from FUSED_UNPACKED_BYTES, of 16-bit x whose rows no pack divides) against
the rule before them (e30f7fb, which took the grouped reductions in the backward from 6.5 MiB of x where they fit),
from the shipped H200 table's timings, or with --table from a `tune --export` file (measured on the GPU it names):
every bf16 suite key of the NCHW training forward and backward, with and without a fused ReLU, whose rule changed,
both plans' times and the best candidate's. Needs no GPU.

    python rule_changes.py [--table EXPORT]
"""

import math
import statistics
import sys
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "h100-2026-12-07-cl-coefs"))

from table_times import candidates_and_times, clear, table_argument

from rust_kernels import ops
from rust_kernels.bench import suite
from rust_kernels.families.batch_norm import training

TRAIN, RELU = {"training": True}, {"activation": "relu"}
# (op, its [B, C, H, W] inputs, scalars by name, its ACTIVATION)
OPS = [("batch_norm_2d_forward", "x", TRAIN, 0), ("batch_norm_2d_backward", "dy x", TRAIN, 0),
       ("batch_norm_2d_act_forward", "x", RELU, 1), ("batch_norm_2d_act_backward", "dy x", RELU, 1)]  # fmt: skip
GROUPS_BACKWARD_BYTES = 13 << 19  # e30f7fb's GROUPS_RULE_BYTES["backward"]


def before(op, big: str, scalars: dict, shape: tuple[int, ...], activation: int):
    """e30f7fb's rule for bf16: today's without the two thresholds, but in the backward the grouped reductions from
    6.5 MiB of x where the rule took the one-launch kernels."""
    with mock.patch.multiple(training, FLAT_RULE_BYTES=math.inf, FUSED_UNPACKED_BYTES=math.inf):
        clear()
        (plan, *_), _ = candidates_and_times(op, big, scalars, shape, "bf16", False)
    clear()
    fused = plan.kernel.name.startswith("batch_norm_2d_fused_backward")
    if fused and math.prod(shape) * 2 >= GROUPS_BACKWARD_BYTES and training.groups_candidate(shape, "bf16", 16, False):
        packs = training.elementwise_mode(shape, "bf16", 16, False)
        return training.backward(shape, "bf16", "f32", training.GROUPS, False, 132, activation=activation, packs=packs)
    return plan


def main() -> None:
    table_argument(__doc__)
    for name, big, scalars, activation in OPS:
        op = getattr(ops, name).op
        gains, lines, missing = [], [], 0
        for shape in suite.shapes("batch_norm_2d"):
            clear()
            (now, *_), times = candidates_and_times(op, big, scalars, shape, "bf16", False)
            old = before(op, big, scalars, shape, activation)
            if now.label == old.label:
                continue
            by_label = {plan.label: us for plan, us in times.items()}
            if now.label not in by_label or old.label not in by_label:
                missing += 1
                continue
            gains.append(by_label[old.label] / by_label[now.label])
            mib = math.prod(shape) * 2 / 2**20
            lines.append(f"  bf16 {'x'.join(map(str, shape))} ({mib:.1f} MiB of x): {by_label[old.label]:.2f} -> "
                         f"{by_label[now.label]:.2f} µs ({gains[-1]:.2f}x; best candidate {min(times.values()):.2f}; "
                         f"before: {old.kernel.name[14:]}, VECTORIZED {old.kernel.vectorized})")  # fmt: skip
        summary = ""
        if gains:
            summary = (f"min {min(gains):.2f}x, median {statistics.median(gains):.2f}x, max {max(gains):.2f}x, "
                       f"{sum(g < 0.97 for g in gains)} slower by more than 3%")  # fmt: skip
        print(f"{name}: the rule changed on {len(gains) + missing} keys ({missing} lack a time); {summary}")
        if lines:
            print("\n".join(lines))


if __name__ == "__main__":
    main()
