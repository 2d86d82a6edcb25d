"""Each tuned op's rule against the best candidate the shipped H200 table timed, over the suite (NCHW and
channels_last, f32 and bf16 with f32 parameters): how far the rule's plan is from the best, per op, layout and dtype,
and the worst key. Where the table serves a key the tuner takes its best plan; the rule runs where nothing is timed
(CUDA-graph capture or torch.compile tracing of an untimed key, tuning off, another GPU before it tunes). Needs no GPU.

    python rule_gaps.py
"""

import statistics

import numpy as np
from table_times import STORAGE, candidates_and_times

from rust_kernels import ops
from rust_kernels.bench import suite

TRAIN, EVAL, RELU = {"training": True}, {"training": False}, {"activation": "relu"}
# (op, its [B, C, H, W] inputs, scalars by name, memory formats: channels_last or not)
CALLS = [("batch_norm_2d_nchw_backward", "dy x", {}, (False,)),
         ("batch_norm_2d_nchw_forward_inference", "x", {}, (False,)),
         ("batch_norm_2d_forward", "x", EVAL, (True,)), ("batch_norm_2d_backward", "dy x", EVAL, (True,)),
         ("batch_norm_2d_act_eval_forward", "x", RELU, (False, True)),
         ("batch_norm_2d_act_eval_backward", "dy x", RELU, (False, True)),
         ("batch_norm_2d_add_relu_eval_forward", "x residual", {}, (False, True)),
         ("batch_norm_2d_add_relu_eval_backward", "dy y x", {}, (False, True)),
         ("batch_norm_2d_forward", "x", TRAIN, (False, True)), ("batch_norm_2d_backward", "dy x", TRAIN, (False, True)),
         ("batch_norm_2d_act_forward", "x", RELU, (False, True)),
         ("batch_norm_2d_act_backward", "dy x", RELU, (False, True)),
         ("batch_norm_2d_add_relu_forward", "x residual", {}, (False, True)),
         ("batch_norm_2d_add_relu_backward", "dy y x", {}, (False, True))]  # fmt: skip


def rule_and_best(op, big, scalars, shape, dtype, channels_last):
    """The rule's time and the best candidate's for this key, or None where the table lacks either."""
    plans, times = candidates_and_times(op, big, scalars, shape, dtype, channels_last)
    return (times[plans[0]], min(times.values())) if plans[0] in times and len(times) > 1 else None


def main() -> None:
    print("op, layout, dtype: keys | rule / best: median, 90th percentile | keys over 1.1x | worst key")
    for name, big, scalars, layouts in CALLS:
        op = getattr(ops, name).op
        for channels_last in layouts:
            for dtype in STORAGE:
                ratios, worst = [], (0.0, None, 0.0, 0.0)
                for shape in suite.shapes("batch_norm_2d"):
                    found = rule_and_best(op, big, scalars, shape, dtype, channels_last)
                    if found:
                        ratios.append(found[0] / found[1])
                        worst = max(worst, (ratios[-1], shape, *found))
                if ratios:
                    where = f"{'x'.join(map(str, worst[1]))} {worst[2]:.1f} against {worst[3]:.1f} µs"
                    print(
                        f"{name} {'channels_last' if channels_last else 'NCHW'} {dtype}: {len(ratios)} | "
                        f"{statistics.median(ratios):.3f}, {np.quantile(ratios, 0.9):.3f} | "
                        f"{sum(r > 1.1 for r in ratios)} | {worst[0]:.2f}x at {where}"
                    )


if __name__ == "__main__":
    main()
