"""Each side's time over A's (ours_us; per cell the median over the rounds), per family and dtype, geometric mean
over shapes. Exits 0 when the first side named is faster than A overall by 1 % or more, else 1.

    python ab_ratio.py OUT B [B2 ...]
"""

import csv
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

out = Path(sys.argv[1])


def times(side: str) -> dict[tuple[str, str, str], float]:
    cells = defaultdict(list)
    for path in sorted(out.glob(f"ab_{side}_r[0-9]/bench.csv")):
        for r in csv.DictReader(path.open()):
            if r["ours_us"] not in ("", "n/a"):
                cells[(r["op"], r["dtype"], r["shape"])].append(float(r["ours_us"]))
    return {k: statistics.median(v) for k, v in cells.items()}


a = times("A")
overall = {}
for side in sys.argv[2:]:
    b = times(side)
    groups = defaultdict(list)
    for k in sorted(a.keys() & b.keys()):
        groups[k[:2]].append(math.log(b[k] / a[k]))
        print(f"{side:3} {k[0]:44} {k[1]:9} {k[2]:16} A {a[k]:9.2f} us  {side} {b[k]:9.2f} us  {b[k] / a[k]:.3f}")
    for (op, dtype), v in sorted(groups.items()):
        print(f"geomean {side}/A {op:44} {dtype:9} {math.exp(sum(v) / len(v)):.3f} over {len(v)} shapes")
    logs = [x for v in groups.values() for x in v]
    overall[side] = math.exp(sum(logs) / len(logs)) if logs else float("nan")
    print(f"geomean {side}/A overall {overall[side]:.3f} over {len(logs)} cells")
sys.exit(0 if overall.get(sys.argv[2], math.inf) <= 0.99 else 1)
