"""The eval backward probe's table from its plans.csv: per shape and dtype the rule's plan before this change (the
probe's first candidate), the grouped kernel at the rule's grid now (backward.grouped's defaults) and at its best,
the best other plan, PyTorch eager, torch.compile and the bound (a same-bytes copy), in µs.

    python summarise.py device_h100/plans.csv     # from the repository root, PYTHONPATH=python
"""

import collections
import csv
import math
import sys

from rust_kernels.families.batch_norm import backward


def label(plan) -> str:
    return f"{plan.kernel.name.removeprefix('batch_norm_2d_')}:{plan.grid}:{dict(plan.values)}"


def main(path: str) -> None:
    by = collections.defaultdict(dict)
    with open(path) as f:
        for row in csv.DictReader(f):
            by[row["dtype"], row["shape"]][row["plan"]] = float(row["us"])
    print("| dtype | shape | x MiB | before (rule) | grouped, rule's grid | grouped, best | best other | eager | "
          "torch.compile | bound | of the bound: before -> best |")
    print("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for (dtype, where), us in by.items():
        shape, storage = tuple(map(int, where.split("x"))), dtype.split("-")[0]
        plans = [k for k in us if ":" in k]
        grouped = [us[k] for k in plans if k.startswith("frozen_backward_grouped:")]
        other = min(us[k] for k in plans if not k.startswith("frozen_backward_grouped:"))
        before = us[plans[0]]
        own = us.get(label(backward.grouped(shape, storage, "f32", 132)), math.nan) if grouped else math.nan
        best = min(us[k] for k in plans)
        mib = math.prod(shape) * (2 if storage == "bf16" else 4) / 2**20
        print(f"| {dtype} | {where} | {mib:.1f} | {before:.2f} | {own:.2f} | {min(grouped, default=math.nan):.2f} | "
              f"{other:.2f} | {us['torch']:.2f} | {us['compile']:.2f} | {us['bound']:.2f} | "
              f"{us['bound'] / before:.2f} -> {us['bound'] / best:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1])
