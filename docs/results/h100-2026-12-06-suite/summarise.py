"""Per op and dtype over bench_suite CSVs (a later file's row replaces an earlier one's of the same op, shape and
dtype): rows, median and worst fraction of the bound (worst over shapes moving >= 8 MB), vs PyTorch eager and
torch.compile (median, worst, how many below 0.97x).

    python summarise.py device_h100/bench_suite_a.csv device_h100/bench_suite_b.csv
"""

import csv
import statistics
import sys

rows = {}
for path in sys.argv[1:]:
    with open(path) as f:
        for r in csv.DictReader(f):
            rows[r["op"], r["shape"], r["dtype"]] = r


def floats(rs, key):
    return [float(r[key]) for r in rs if r[key] not in ("", "n/a")]


print(f"{'op':45s} {'dtype':9s} {'rows':>4s} {'bound med':>9s} {'min>=8MB':>8s} {'eager med':>9s} {'min':>6s} "
      f"{'<0.97':>5s} {'compile med':>11s} {'min':>6s} {'<0.97':>5s}")  # fmt: skip
for op, dtype in sorted({(k[0], k[2]) for k in rows}):
    rs = [r for k, r in rows.items() if k[0] == op and k[2] == dtype]
    bound = floats(rs, "fraction_of_bound")
    big = floats([r for r in rs if int(r["bytes"]) >= 8e6], "fraction_of_bound")
    eager, compiled = floats(rs, "vs_torch"), floats(rs, "vs_compile")
    print(
        f"{op:45s} {dtype:9s} {len(rs):4d} {statistics.median(bound):9.3f} {min(big, default=float('nan')):8.3f} "
        f"{statistics.median(eager):8.2f}x {min(eager):5.2f}x {sum(v < 0.97 for v in eager):5d} "
        f"{statistics.median(compiled) if compiled else float('nan'):10.2f}x "
        f"{min(compiled, default=float('nan')):5.2f}x {sum(v < 0.97 for v in compiled):2d}/{len(compiled):<2d}"
    )
