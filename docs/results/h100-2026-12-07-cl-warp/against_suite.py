"""device/run2's bench of the channels_last training op over the small suite shapes against the previous session's
H100 suite run (../h100-2026-12-07-rules/device/suite/, before the warp kernels) on the shapes both timed: ours' µs,
and our speed against eager in each run (the same process's torch, so the machines' difference cancels).

    python against_suite.py
"""

import csv
import statistics
from pathlib import Path

HERE = Path(__file__).resolve().parent
OP = "batch_norm_2d_training_channels_last"


def main() -> None:
    with open(HERE / "device/run2/bench_small/bench.csv") as f:
        new = {(r["shape"], r["dtype"]): r for r in csv.DictReader(f)}
    with open(HERE.parent / "h100-2026-12-07-rules/device/suite/bench_suite.csv") as f:
        old = {(r["shape"], r["dtype"]): r for r in csv.DictReader(f) if r["op"] == OP}
    print("shape dtype | before: ours µs, torch µs, vs torch | now: ours µs, torch µs, vs torch | gain vs torch")
    gains: dict[str, list[float]] = {}
    for key in sorted(set(new) & set(old)):
        o, n = old[key], new[key]
        before, now = float(o["vs_torch"]), float(n["us_torch"]) / float(n["us_ours"])
        gains.setdefault(key[1], []).append(now / before)
        print(
            f"{key[0]} {key[1]} | {o['ours_us']}, {o['torch_us']}, {before:.2f}x | {n['us_ours']}, {n['us_torch']}, "
            f"{now:.2f}x | {now / before:.2f}"
        )
    for dtype, found in gains.items():
        print(
            f"{dtype}: {len(found)} shapes, gain in speed against eager: median {statistics.median(found):.2f}x, "
            f"min {min(found):.2f}x, max {max(found):.2f}x"
        )


if __name__ == "__main__":
    main()
