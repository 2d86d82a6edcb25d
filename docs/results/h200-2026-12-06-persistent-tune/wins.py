"""Per tuning key with persistent candidates in an export (tune --export FILE): the best persistent plan against the
best other plan, and the winning persistent plan, by shape class.

    python wins.py FILE.json.gz
"""

import gzip
import json
import statistics
import sys
from collections import defaultdict

with gzip.open(sys.argv[1]) as f:
    entries = json.load(f)["entries"].values()
keys: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
for e in entries:
    if e["us"] is None:
        continue
    kernel = e["plan"].split()[0]
    direction = "forward" if "forward" in kernel or "stats" in kernel or "moments" in kernel else "backward"
    keys[(e["key"], direction)][e["plan"]] = e["us"]
rows = []
for (key, direction), plans in sorted(keys.items()):
    persistent = {p: us for p, us in plans.items() if "persistent" in p}
    other = {p: us for p, us in plans.items() if "persistent" not in p}
    if not persistent or not other:
        continue
    shape, dtype = json.loads(key)[:2]
    best_p = min(persistent, key=persistent.get)
    best_o = min(other, key=other.get)
    mb = shape[0] * shape[1] * shape[2] * shape[3] * (2 if dtype.startswith("bf16") else 4) / 1e6
    gain = other[best_o] / persistent[best_p]
    rows.append((direction, dtype, shape, mb, gain, persistent[best_p], other[best_o], best_p))
for direction in ("forward", "backward"):
    for dtype in sorted({r[1] for r in rows}):
        sel = [r for r in rows if r[0] == direction and r[1] == dtype]
        if not sel:
            continue
        gains = [r[4] for r in sel]
        print(
            f"{direction:8} {dtype:9} keys {len(sel):4}  persistent faster on {sum(g > 1 for g in gains):4}"
            f"  best other / best persistent: median {statistics.median(gains):.3f}, min {min(gains):.3f},"
            f" max {max(gains):.3f}"
        )
print()
for r in sorted(rows, key=lambda r: (r[0], r[1], r[3])):
    shape = "x".join(map(str, r[2]))
    print(f"{r[0]:8} {r[1]:9} {shape:16} {r[3]:6.2f} MB  {r[4]:.3f}x  {r[5]:7.2f} vs {r[6]:7.2f} us  {r[7]}")
