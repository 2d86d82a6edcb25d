"""From a `tune --export` file of the channels_last training op (go5.sh's): per key and direction (with an
activation or not), the best cooperative plan at each grid (CTAs an SM), the best other plan, and which wins.

    python coop_grids.py device/run5/tune_coop.json.gz
"""

import gzip
import json
import sys
from collections import defaultdict
from pathlib import Path

SMS = 132


def main(path: str) -> None:
    table = json.loads(gzip.decompress(Path(path).read_bytes()))
    best: dict[tuple[str, str], dict[str, tuple[float, str]]] = defaultdict(dict)
    for e in table["entries"].values():
        if e["us"] is None:
            continue
        kernel = e["plan"].split()[0]
        direction = "forward" if "forward" in kernel or "stats" in kernel else "backward"
        direction += " + act" if "_act" in e["plan"] else ""
        if "_cooperative_" in kernel:
            values = dict(v.split("=") for v in e["plan"].split()[1:] if "=" in v)
            shape, dtype = json.loads(e["key"])[:2]
            groups = shape[1] // (8 if dtype.startswith(("bf16", "f16")) else 4)  # units of 16 bytes
            per_sm = groups // int(values["cols"]) * int(values["split"]) / SMS
            kind = f"coop {per_sm:.1f}/SM"
        else:
            kind = "other"
        slot = best[e["key"], direction]
        if kind not in slot or e["us"] < slot[kind][0]:
            slot[kind] = (e["us"], e["plan"])
    for (key, direction), slot in sorted(best.items()):
        shape, dtype = json.loads(key)[:2]
        shape = "x".join(map(str, shape)) + " " + dtype
        shown = ", ".join(f"{k} {v[0]:.2f}" for k, v in sorted(slot.items()))
        print(f"{shape} {direction}: {shown}")


if __name__ == "__main__":
    main(sys.argv[1])
