"""The README's table from probe_act.py's CSVs: per case the rule's plan when it ran (the first plan of the case,
the split kernel), the grouped act kernel at backward.grouped_split's split, the best grouped plan, torch.compile and
eager (µs), then how many cases each way below GROUPED_ACT_CHANNELS_PER_SM channels an SM.

    python summarise.py device_h100_1/plans_act.csv device_h100_1/plans_act_more.csv
"""

import collections
import csv
import sys

from rust_kernels.families.batch_norm import backward

SMS = 132
NAME = "frozen_backward_grouped_act"


def label(plan) -> str:
    return f"{plan.kernel.name.removeprefix('batch_norm_2d_')}:{plan.grid}:{dict(plan.values)}"


def main(paths: list[str]) -> None:
    cases = collections.defaultdict(dict)
    for path in paths:
        with open(path) as f:
            for row in csv.DictReader(f):
                cases[row["dtype"], row["shape"]][row["plan"]] = float(row["us"])
    many, few = [], []
    for (dtype, where), us in cases.items():
        shape = tuple(int(d) for d in where.split("x"))
        storage = dtype.split("-")[0]
        rule = us[next(k for k in us if ":" in k)]
        grouped = {k: v for k, v in us.items() if k.startswith(NAME + ":")}
        best = min(grouped.values())
        if shape[1] < backward.GROUPED_ACT_CHANNELS_PER_SM * SMS:
            few.append(rule / best)
            continue
        now = grouped.get(label(backward.grouped(shape, storage, "f32", SMS, activation=1)), float("nan"))
        many.append((rule / now, f"| {storage} | {where} | {rule:.2f} | {now:.2f} ({rule / now:.2f}x) | {best:.2f} | "
                                 f"{us['compile']:.2f} | {us['torch']:.2f} |"))  # fmt: skip
    for _, line in sorted(many, reverse=True):
        print(line)
    print(
        f"below {backward.GROUPED_ACT_CHANNELS_PER_SM * SMS} channels: {len(few)} cases, best grouped "
        f"{min(few):.2f}-{max(few):.2f}x the rule's, slower on {sum(r < 1 for r in few)}"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
