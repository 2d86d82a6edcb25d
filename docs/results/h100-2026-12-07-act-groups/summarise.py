"""The README's table from probe_act.py's CSVs: per case the rule's plan when it ran (the first plan of the case,
the split kernel), the grouped act kernel at backward.grouped_split's split, the best grouped plan, torch.compile and
eager (µs), then how many cases each way below GROUPED_ACT_CHANNELS_PER_SM channels an SM. `splits`: over the CSVs of
both grouped kernels, how close backward.grouped_split's split came to the best grouped plan timed, and to the split
the grouped kernel took by default before (the training reductions' geometry, halved to 2 CTAs an SM at most).

    python summarise.py device_h100_1/plans_act.csv device_h100_1/plans_act_more.csv
    python summarise.py splits ../h100-2026-12-07-eval-groups/device_h100/plans.csv device_h100_1/plans_act*.csv
"""

import collections
import csv
import sys

from rust_kernels.families.batch_norm import backward, training

SMS = 132
NAME = "frozen_backward_grouped_act"


def label(plan) -> str:
    return f"{plan.kernel.name.removeprefix('batch_norm_2d_')}:{plan.grid}:{dict(plan.values)}"


def read(paths: list[str]) -> dict:
    cases = collections.defaultdict(dict)
    for path in paths:
        with open(path) as f:
            for row in csv.DictReader(f):
                cases[row["dtype"], row["shape"]][row["plan"]] = float(row["us"])
    return cases


def old_split(shape, dtype: str, cols: int) -> int:
    split, grid_x = training.geometry(shape, dtype, training.GROUPS, False, SMS)[1], -(-shape[1] // cols)
    while split > 1 and grid_x * split > 2 * SMS:
        split //= 2
    return split


def splits(paths: list[str]) -> None:
    timed = close = faster = slower = 0
    for (dtype, where), us in read(paths).items():
        shape, storage = tuple(int(d) for d in where.split("x")), dtype.split("-")[0]
        for act, name in ((1, NAME), (0, "frozen_backward_grouped")):
            grouped = {k: v for k, v in us.items() if k.startswith(name + ":")}
            if not grouped:
                continue
            now = backward.grouped(shape, storage, "f32", SMS, activation=act)
            cols = int(now.value("COLS"))
            before = backward.grouped(shape, storage, "f32", SMS, old_split(shape, storage, cols), cols, act)
            if label(now) not in grouped:
                continue
            timed += 1
            close += min(grouped.values()) / grouped[label(now)] > 0.97
            if label(before) in grouped:
                faster += grouped[label(now)] < 0.99 * grouped[label(before)]
                slower += grouped[label(before)] < 0.99 * grouped[label(now)]
    print(
        f"grouped_split timed on {timed} cases: within 3% of the best grouped plan on {close}; faster than the "
        f"old default by more than 1% on {faster}, slower on {slower}"
    )


def main(paths: list[str]) -> None:
    cases = read(paths)
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
    splits(sys.argv[2:]) if sys.argv[1:2] == ["splits"] else main(sys.argv[1:])
