"""Summarises ncu's CSV (--csv --page raw --print-units base) of bn_step.py by kernel: launches, time, DRAM bytes
and bandwidth, and the means of DRAM and SM throughput (% of peak), achieved occupancy and the main stall reasons
(warps per issue)."""

import collections
import csv
import sys

METRICS = {
    "dram": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "occupancy": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "long_sb": "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
    "barrier": "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
    "math": "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio",
}


def number(text: str) -> float:
    return float(text.replace(",", "")) if text not in ("", "n/a") else 0.0


with open(sys.argv[1]) as f:
    lines = [line for line in f if not line.startswith("==")]  # ncu's own messages before the table
rows = [r for r in csv.DictReader(lines) if r.get("ID", "").isdigit()]
groups: dict[str, list[dict[str, str]]] = collections.defaultdict(list)
for r in rows:
    groups[r["Kernel Name"].split("(")[0][:60]].append(r)
print(f"{'kernel':<60} {'n':>3} {'ms':>7} {'GB':>6} {'TB/s':>5} " + " ".join(f"{k:>9}" for k in METRICS))
totals: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0])
for name, rs in sorted(groups.items(), key=lambda kv: -sum(number(r["gpu__time_duration.sum"]) for r in kv[1])):
    ms = sum(number(r["gpu__time_duration.sum"]) for r in rs) / 1e6  # ns
    gb = sum(number(r["dram__bytes_read.sum"]) + number(r["dram__bytes_write.sum"]) for r in rs) / 1e9
    side = totals["ours" if name.endswith("_entry_point") else "torch"]
    side[0], side[1] = side[0] + ms, side[1] + gb
    means = [sum(number(r[m]) for r in rs) / len(rs) for m in METRICS.values()]
    print(f"{name:<60} {len(rs):>3} {ms:7.3f} {gb:6.2f} {gb / ms:5.2f} " + " ".join(f"{v:9.2f}" for v in means))
for side, (ms, gb) in sorted(totals.items()):
    print(f"{side}: {ms:.3f} ms, {gb:.2f} GB, {gb / ms:.2f} TB/s")
