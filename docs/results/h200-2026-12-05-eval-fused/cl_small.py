"""Per tuning key of cl_small.sh's export: the best one-launch channels_last plan (batch_norm_2d_fused_*_channels_last)
against the best two-launch plan, both timed in that one forced run.

    python cl_small.py tune_cl_small.json.gz
"""

import gzip
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

entries = json.loads(gzip.decompress(Path(sys.argv[1]).read_bytes()))["entries"]
keys: dict[str, dict[str, list[float]]] = defaultdict(lambda: {"one": [], "two": []})
for e in entries.values():
    if e.get("us") is None or "[0, 2, 3, 1]" not in e["key"]:
        continue
    one = "_fused_forward_channels_last" in e["plan"] or "_fused_backward_channels_last" in e["plan"]
    direction = "forward" if "forward" in e["plan"] or "batch_stats" in e["plan"] else "backward"
    keys[e["key"] + " " + direction]["one" if one else "two"].append(e["us"])
rows = [(k, min(v["two"]), min(v["one"])) for k, v in keys.items() if v["one"] and v["two"]]
for direction in ("forward", "backward"):
    mine = sorted((two / one, k, two, one) for k, two, one in rows if k.endswith(direction))
    if not mine:
        continue
    ratios = [r for r, *_ in mine]
    print(
        f"{direction}: {len(mine)} keys; best two-launch / best one-launch: median {statistics.median(ratios):.3f}x,"
        f" one-launch faster on {sum(r > 1 for r in ratios)} (by > 5 % on {sum(r > 1.05 for r in ratios)}),"
        f" max {max(ratios):.2f}x, min {min(ratios):.2f}x"
    )
    for r, k, two, one in mine[-12:]:
        print(f"  {r:5.2f}x  two {two:8.2f} us  one {one:8.2f} us  {k}")
