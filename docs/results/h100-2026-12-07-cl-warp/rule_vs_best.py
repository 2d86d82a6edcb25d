"""The channels_last training rule's plan against the best candidate a `tune --export` file timed, over
shapes.txt: per op and dtype the rule's time over the best's (median, 90th percentile, worst). Needs no GPU.

    python rule_vs_best.py device/tune_cl_warp.json.gz
"""

import statistics
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "h100-2026-12-07-cl-coefs"))
from table_times import STORAGE, candidates_and_times, use_export  # noqa: E402

from rust_kernels import ops  # noqa: E402

TRAIN, RELU = {"training": True}, {"activation": "relu"}
CALLS = [("batch_norm_2d_forward", "x", TRAIN), ("batch_norm_2d_backward", "dy x", TRAIN),
         ("batch_norm_2d_act_forward", "x", RELU), ("batch_norm_2d_act_backward", "dy x", RELU)]  # fmt: skip


def main(path: str) -> None:
    print(f"times: {Path(path).name}, measured on {use_export(Path(path))}")
    shapes = [tuple(map(int, line.split("x"))) for line in (HERE / "shapes.txt").read_text().split()]
    print("op dtype: keys | rule / best: median, 90th percentile, worst (shape)")
    for name, big, scalars in CALLS:
        op = getattr(ops, name).op
        for dtype in STORAGE:
            found = []
            for shape in shapes:
                plans, times = candidates_and_times(op, big, scalars, shape, dtype, True)
                if plans[0] in times:
                    found.append((times[plans[0]] / min(times.values()), shape))
            ratios = [r for r, _ in found]
            worst = max(found)
            print(
                f"{name} {dtype}: {len(found)} | {statistics.median(ratios):.3f}, {np.quantile(ratios, 0.9):.3f}, "
                f"{worst[0]:.2f} ({'x'.join(map(str, worst[1]))})"
            )


if __name__ == "__main__":
    main(sys.argv[1])
