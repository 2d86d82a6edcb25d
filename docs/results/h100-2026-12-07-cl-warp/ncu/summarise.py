"""ncu's CSV (--csv --page raw --print-units base) of pair.py runs, one per shape, as a table: per shape and side
(ours: the rust_kernels entry points; compile: Inductor's triton kernels; torch: the rest), each kernel's time, DRAM
bytes and bandwidth, grid, registers, achieved occupancy and the main stall reasons (warps per issue).

    python summarise.py ncu_*.csv
"""

import csv
import sys
from pathlib import Path

METRICS = {
    "µs": "gpu__time_duration.sum",
    "MB": None,
    "TB/s": None,
    "dram%": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "grid": "launch__grid_size",
    "regs": "launch__registers_per_thread",
    "occ%": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "long_sb": "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
    "barrier": "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
    "membar": "smsp__average_warps_issue_stalled_membar_per_issue_active.ratio",
    "sleep": "smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio",
}


def number(text: str) -> float:
    return float(text.replace(",", "")) if text not in ("", "n/a") else 0.0


def side(name: str) -> str:
    return "ours" if "entry_point" in name else "compile" if name.startswith("triton") else "torch"


def main(paths: list[str]) -> None:
    print(f"{'shape_dtype':<23} {'side':<7} {'kernel':<58} " + " ".join(f"{k:>7}" for k in METRICS))
    for path in paths:
        shape = Path(path).stem.removeprefix("ncu_")  # BxCxHxW_DTYPE
        with open(path) as f:
            lines = [line for line in f if not line.startswith("==")]
        rows = [r for r in csv.DictReader(lines) if r.get("ID", "").isdigit()]
        totals: dict[str, float] = {}
        for r in rows:
            name = r["Kernel Name"].split("(")[0]
            us = number(r["gpu__time_duration.sum"]) / 1e3
            mb = (number(r["dram__bytes_read.sum"]) + number(r["dram__bytes_write.sum"])) / 1e6
            values = {"µs": us, "MB": mb, "TB/s": mb / us if us else 0.0}  # MB a µs: TB/s
            values.update({k: number(r[m]) for k, m in METRICS.items() if m and k != "µs"})
            totals[side(name)] = totals.get(side(name), 0.0) + us
            print(f"{shape:<23} {side(name):<7} {name[:58]:<58} " + " ".join(f"{values[k]:7.2f}" for k in METRICS))
        print(f"{shape:<23} totals µs: " + ", ".join(f"{s} {t:.1f}" for s, t in totals.items()))


if __name__ == "__main__":
    main(sys.argv[1:])
