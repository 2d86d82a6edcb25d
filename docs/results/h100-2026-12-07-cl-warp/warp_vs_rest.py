"""From a `tune --export` file: per key and direction of the channels_last training ops, the best channels_last
warp-kernel plan against the best other candidate (and which that is), and the rule's plan as it stands.

    python warp_vs_rest.py device/tune_cl_warp.json.gz
"""

import gzip
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def main(path: str) -> None:
    table = json.loads(gzip.decompress(Path(path).read_bytes()))
    best = defaultdict(dict)  # (key, direction, act) -> {"warp": (us, plan), "rest": (us, plan)}
    for e in table["entries"].values():
        if e["us"] is None:
            continue
        kernel = e["plan"].split()[0]
        direction = "forward" if "forward" in kernel or "stats" in kernel else "backward"
        act = "_act" in kernel.split("__")[0] or "relu" in kernel.split("__")[0]
        kind = "warp" if "_warp_" in kernel else "rest"
        slot = best[e["key"], direction, act]
        if kind not in slot or e["us"] < slot[kind][0]:
            slot[kind] = (e["us"], e["plan"])
    rows = defaultdict(list)
    print("shape dtype direction act | warp µs | best other µs (plan) | other / warp")
    for (key, direction, act), slot in sorted(best.items()):
        if "warp" not in slot or "rest" not in slot:
            continue
        shape, dtype = json.loads(key)[:2]
        ratio = slot["rest"][0] / slot["warp"][0]
        rows[direction, dtype].append((ratio, shape[0] * shape[2] * shape[3], shape))
        print(
            f"{'x'.join(map(str, shape))} {dtype} {direction} {'relu' if act else '-'} | {slot['warp'][0]:.2f} | "
            f"{slot['rest'][0]:.2f} ({slot['rest'][1][:70]}) | {ratio:.2f}"
        )
    print("\ndirection dtype: keys | other / warp: min median max | warp faster by > 3% | by rows (B*H*W)")
    for (direction, dtype), found in sorted(rows.items()):
        ratios = [r for r, _, _ in found]
        by_rows = defaultdict(list)
        for r, n, _ in found:
            by_rows[n].append(r)
        shown = ", ".join(f"{n}: {statistics.median(v):.2f}" for n, v in sorted(by_rows.items()))
        print(
            f"{direction} {dtype}: {len(ratios)} | {min(ratios):.2f} {statistics.median(ratios):.2f} "
            f"{max(ratios):.2f} | {sum(r > 1.03 for r in ratios)} | {shown}"
        )


if __name__ == "__main__":
    main(sys.argv[1])
