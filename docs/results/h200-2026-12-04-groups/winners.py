"""From the shipped tuning table (after tune.sh's exports are merged): per key and direction where a GROUPS
reduction was a candidate, the best GROUPS plan's time against the best of the others (plain or with an activation
fused; ReLU and add + ReLU together), summarised by dtype, direction and kind, and the largest gains."""

import collections
import gzip
import json
import statistics
import sys

with gzip.open(sys.argv[1]) as f:
    table = json.load(f)["entries"]
by_case = collections.defaultdict(list)
for e in table.values():
    if e.get("us") is None:
        continue
    direction = "forward" if any(k in e["plan"] for k in ("batch_stats", "fused_forward")) else "backward"
    kind = "act" if "_act" in e["plan"] or "add_relu" in e["plan"] else "plain"
    by_case[e["key"], direction, kind].append(e)


def grouped(entry: dict) -> bool:
    first = entry["plan"].split()[0]
    return "__4__0" in first and ("batch_stats" in first or "backward_reduce" in first)


gains, best = [], {}
for case, entries in by_case.items():
    new = [e["us"] for e in entries if grouped(e)]
    old = [e["us"] for e in entries if not grouped(e)]
    if new and old:
        gains.append((case, min(old) / min(new)))
        best[case] = (min(old), min(old + new))
print(f"{len(gains)} key-directions with GROUPS candidates; GROUPS fastest on {sum(g > 1 for _, g in gains)}")
summary = collections.defaultdict(list)
for (key, direction, kind), gain in gains:
    summary[json.loads(key)[1], direction, kind].append(gain)
print(f"{'dtype':>9} {'direction':>9} {'kind':>5} {'keys':>5} {'won':>4} {'median win':>10} {'max':>6}")
for (dtype, direction, kind), values in sorted(summary.items()):
    wins = [v for v in values if v > 1]
    median = f"{statistics.median(wins):.2f}x" if wins else "-"
    print(f"{dtype:>9} {direction:>9} {kind:>5} {len(values):5d} {len(wins):4d} {median:>10} {max(values):5.2f}x")
print("largest gains (best other / best GROUPS):")
for (key, direction, kind), gain in sorted(gains, key=lambda g: -g[1])[:12]:
    shape, dtype = json.loads(key)[:2]
    print(f"  {'x'.join(map(str, shape)):>14} {dtype:>9} {direction:>9} {kind:>5} {gain:.2f}x")
pairs = collections.defaultdict(list)
for (key, direction, kind), (before, after) in best.items():
    other = best.get((key, "backward" if direction == "forward" else "forward", kind))
    if direction == "forward" and other:
        pairs[json.loads(key)[1], kind].append((before + other[0]) / (after + other[1]))
print("forward + backward, the tuner's choice with GROUPS against without (per key):")
for (dtype, kind), values in sorted(pairs.items()):
    median, most, above = statistics.median(values), max(values), sum(v > 1.02 for v in values)
    print(f"  {dtype:>9} {kind:>5} {len(values):3d} keys: median {median:.3f}x, max {most:.2f}x, {above} above 1.02x")
