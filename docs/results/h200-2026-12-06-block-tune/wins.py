"""Per tuning key the export (tune --export FILE) timed block candidates of, and per training op (plain, + ReLU,
+ add + ReLU: a key holds every op's plans, told apart by their kernels) and direction: the best block plan against
the best other plan of the merged table (the package's H200 table, which holds both), by dtype.

    python wins.py FILE.json.gz   # from the repository root, after merge_tuning_table.py FILE.json.gz
"""

import gzip
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

TABLE = Path("python/rust_kernels/tables/nvidia-h200-132sm.json.gz")
with gzip.open(sys.argv[1]) as f:
    timed = {e["key"] for e in json.load(f)["entries"].values()}
with gzip.open(TABLE) as f:
    entries = [e for e in json.load(f)["entries"].values() if e["key"] in timed and e["us"] is not None]
keys: dict[tuple[str, str, str], dict[str, float]] = defaultdict(dict)
for e in entries:
    plan = e["plan"]
    if "nchw_" in plan:  # the eval ops' plans, under the same keys
        continue
    op = "add_relu" if "add_relu" in plan else "relu" if "_act" in plan else "plain"
    direction = "forward" if any(w in plan.split()[0] for w in ("forward", "stats", "moments")) else "backward"
    keys[(e["key"], op, direction)][plan] = e["us"]
rows = []
for (key, op, direction), plans in sorted(keys.items()):
    block = {p: us for p, us in plans.items() if "block" in p}
    other = {p: us for p, us in plans.items() if "block" not in p}
    if block and other:
        shape, dtype = json.loads(key)[:2]
        best_b, best_o = min(block, key=block.get), min(other, key=other.get)
        rows.append((op, direction, dtype, shape, other[best_o] / block[best_b], block[best_b], other[best_o], best_b))
for op in ("plain", "relu", "add_relu"):
    for direction in ("forward", "backward"):
        for dtype in sorted({r[2] for r in rows}):
            gains = [r[4] for r in rows if r[:3] == (op, direction, dtype)]
            if gains:
                print(f"{op:8} {direction:8} {dtype:9} keys {len(gains):4}  block faster on "
                      f"{sum(g > 1 for g in gains):4}  best other / best block: median {statistics.median(gains):.3f},"
                      f" min {min(gains):.3f}, max {max(gains):.3f}")  # fmt: skip
print()
for r in sorted(rows, key=lambda r: (r[0], r[1], r[2], -r[4])):
    print(f"{r[0]:8} {r[1]:8} {r[2]:9} {'x'.join(map(str, r[3])):16} {r[4]:.3f}x  {r[5]:7.2f} vs {r[6]:7.2f} us  "
          f"{r[7]}")  # fmt: skip
