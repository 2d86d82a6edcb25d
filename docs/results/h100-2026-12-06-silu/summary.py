"""probe.py's runs summarised (python summary.py device/probe): per layout and direction the geometric mean of B / A
(each case's best of its two runs a side), ours against torch's (torch's best of all four runs) before and after, and
the largest ratio of our error against float64 to torch's, y and dx, over the B runs."""

import csv
import statistics
import sys
from collections import defaultdict
from pathlib import Path

RUNS = {"A": ("A1", "A2"), "B": ("B1", "B2")}


def main(folder: Path) -> None:
    rows = {}
    for tag in (*RUNS["A"], *RUNS["B"]):
        for row in csv.DictReader((folder / f"probe_{tag}.csv").open()):
            rows[tag, row["shape"], row["layout"]] = row
    cases = sorted({(shape, layout) for _, shape, layout in rows})
    ratios = defaultdict(list)
    for shape, layout in cases:
        for kind in ("train", "eval"):
            best = {side: min(float(rows[t, shape, layout][f"ours_{kind}_us"]) for t in runs)
                    for side, runs in RUNS.items()}  # fmt: skip
            torch = min(float(rows[t, shape, layout][f"torch_{kind}_us"]) for t in (*RUNS["A"], *RUNS["B"]))
            ratios[layout, kind].append((best["B"] / best["A"], torch / best["A"], torch / best["B"]))
    print("layout, direction: B / A geomean (min, max); torch / ours geomean A -> B; cases slower than torch A -> B")
    for (layout, kind), values in ratios.items():
        b_a, before, after = zip(*values, strict=True)
        print(f"{layout} {kind}: {statistics.geometric_mean(b_a):.3f} ({min(b_a):.3f}, {max(b_a):.3f}); "
              f"{statistics.geometric_mean(before):.2f}x -> {statistics.geometric_mean(after):.2f}x; "
              f"{sum(r < 0.97 for r in before)} -> {sum(r < 0.97 for r in after)} of {len(values)}")  # fmt: skip
    errors = [(float(r["ours_y_err"]) / float(r["torch_y_err"]), float(r["ours_dx_err"]) / float(r["torch_dx_err"]))
              for (tag, _, _), r in rows.items() if tag in RUNS["B"]]  # fmt: skip
    print(
        f"B: our error / torch's against float64, at most: y {max(e[0] for e in errors):.2f}, "
        f"dx {max(e[1] for e in errors):.2f}"
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
