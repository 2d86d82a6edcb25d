"""Per key tuned in tune_cl.json.gz: the tuner's best one-launch channels_last plan against its best two-launch plan
(times from the export over those of the shipped table before it), per direction, with what the rule
(training.columns_rule) takes.
Run from the repository root after the export was taken, before it was merged:
    PYTHONPATH=python python3 docs/results/h200-2026-12-02-cl-one-launch/scripts/one_launch_vs_two.py TABLE EXPORT
"""

import gzip
import json
import statistics
import sys
from collections import defaultdict

from rust_kernels.dtypes import DTYPES
from rust_kernels.families.batch_norm import training as t


def load(path):
    with open(path, "rb") as f:
        return json.loads(gzip.decompress(f.read()))


table, export = (load(p) for p in sys.argv[1:3])
times = {}
for source in (table, export):
    for record in source["entries"].values():
        times[(record["key"], record["plan"])] = record["us"]
tuned = {record["key"] for record in export["entries"].values()}
by_key = defaultdict(list)
for (key, plan), us in times.items():
    if key in tuned and us is not None:  # a key is timed for the forward's plans and the backward's
        forward = "batch_stats" in plan or "fused_forward" in plan
        by_key[key, "forward" if forward else "backward"].append((us, plan))
rows, groups = [], defaultdict(list)
for (key, which), timed in by_key.items():
    one = [r for r in timed if any(k.spec.name + "__" in r[1] for k in t.FUSED_COLUMNS.values())]
    two = [r for r in timed if r not in one]
    if not one or not two:
        continue
    (us1, plan1), (us2, _) = min(one), min(two)
    shape, dtype_key = tuple(json.loads(key)[0]), json.loads(key)[1]
    dtype = dtype_key.split("-")[0]
    vectorized = t.vector_mode(shape, dtype, 16, True)
    column = shape[0] * shape[2] * shape[3] * t.lanes(vectorized, dtype) * DTYPES[dtype].size
    act = "relu" if "_act__" in plan1 else "none"
    rule = t.columns_rule(shape, dtype, vectorized, 132)
    groups[(which, dtype_key, act, rule is not None)].append(us2 / us1)
    rows.append(
        (
            shape[0] * shape[1] * shape[2] * shape[3] * DTYPES[dtype].size,
            us2 / us1,
            shape,
            dtype_key,
            act,
            which,
            us2,
            us1,
            column,
            rule,
            plan1.split()[0].rsplit("__", 3)[-3:],
            plan1.split()[1],
        )
    )
print(
    f"{'x MB':>7} {'two/one':>7} {'shape':>18} {'dtype':9} {'act':4} {'op':8} {'two us':>7} {'one us':>7} "
    f"{'column KB':>9}  rule's (block, cols); best one-launch"
)
for r in sorted(rows):
    print(
        f"{r[0] / 1e6:7.3f} {r[1]:7.2f} {'x'.join(map(str, r[2])):>18} {r[3]:9} {r[4]:4} {r[5]:8} {r[6]:7.1f} "
        f"{r[7]:7.1f} {r[8] / 1e3:9.1f}  {r[9]}; {'__'.join(r[10])} {r[11]}"
    )
print()
for (which, dtype_key, act, ruled), ratios in sorted(groups.items()):
    print(
        f"{which:8} {dtype_key:9} act {act:4} rule takes it: {ruled!s:5} keys {len(ratios):3}  two/one median "
        f"{statistics.median(ratios):.2f}  min {min(ratios):.2f}  max {max(ratios):.2f}  "
        f"one faster on {sum(x > 1 for x in ratios)}"
    )
