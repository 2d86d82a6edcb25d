"""Side A against side B, from go.sh's tune exports (tune_A1, tune_B1, tune_A2, tune_B2): per key-direction and plan
the median of each side's runs, then per key-direction the best plan of each side and the ratio A / B (above 1: B
faster), by dtype and kind (persistent, cooperative). Prints a table and the medians.

    python compare.py DIR
"""

import gzip
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def runs(directory: Path, side: str) -> dict[tuple[str, str], list[float]]:
    out: dict[tuple[str, str], list[float]] = defaultdict(list)
    for path in sorted(directory.glob(f"tune_{side}*.json.gz")):
        for entry in json.loads(gzip.decompress(path.read_bytes()))["entries"].values():
            if entry.get("us") is not None:
                out[entry["key"], entry["plan"]].append(entry["us"])
    return out


def kind(plan: str) -> str:
    return "persistent" if "_persistent_" in plan else "cooperative"


def direction(plan: str) -> str:
    return "forward" if "_forward_" in plan else "backward"


def main(directory: Path) -> None:
    a, b = runs(directory, "A"), runs(directory, "B")
    best: dict[tuple[str, str, str], dict[str, tuple[float, str]]] = defaultdict(dict)
    for side, timings in (("A", a), ("B", b)):
        for (key, plan), times in timings.items():
            group = (key, direction(plan), kind(plan))
            us = statistics.median(times)
            if side not in best[group] or us < best[group][side][0]:
                best[group][side] = (us, plan)
    ratios: dict[tuple[str, str], list[float]] = defaultdict(list)
    print(f"{'shape, dtype':32} {'direction':9} {'kind':12} {'A us':>8} {'B us':>8} {'A/B':>6}")
    for (key, way, what), sides in sorted(best.items()):
        if len(sides) < 2:
            continue
        (au, _), (bu, _) = sides["A"], sides["B"]
        shape, dtype = json.loads(key)[:2]
        ratios[dtype, what].append(au / bu)
        label = "x".join(map(str, shape)) + " " + dtype
        print(f"{label:32} {way:9} {what:12} {au:8.2f} {bu:8.2f} {au / bu:6.3f}")
    print()
    for (dtype, what), values in sorted(ratios.items()):
        print(
            f"{dtype:9} {what:12} key-directions {len(values):3}  A/B median {statistics.median(values):.3f}  "
            f"range {min(values):.3f}-{max(values):.3f}"
        )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
