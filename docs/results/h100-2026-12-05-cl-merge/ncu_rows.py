"""ncu's CSV (--csv --page raw --print-units base) of ncu_step.py, a line per kernel under its shape: grid, block,
registers, time, DRAM bytes and throughput, achieved occupancy, SM cycles active (mean and max over the SMs, as a
fraction of the kernel's elapsed cycles: a low mean with a high max is a tail of few CTAs), and stalls (warps per
issue).

    python ncu_rows.py ncu_ours.csv
"""

import csv
import sys

from ncu_step import SHAPES

COLUMNS = {
    "dram%": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "occ%": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "long_sb": "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
    "barrier": "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
    "membar": "smsp__average_warps_issue_stalled_membar_per_issue_active.ratio",
}


def number(r: dict[str, str], metric: str) -> float:
    text = r.get(metric, "")
    return float(text.replace(",", "")) if text not in ("", "n/a") else 0.0


with open(sys.argv[1]) as f:
    rows = [r for r in csv.DictReader(line for line in f if not line.startswith("==")) if r.get("ID", "").isdigit()]
shape = -1
for r in rows:
    name = r["Kernel Name"].split("(")[0].removeprefix("void ")
    if "FillFunctor<float>" in name:  # the marker (torch fills ints for its own semaphores)
        shape += 1
        print(f"== {'x'.join(map(str, SHAPES[shape][0]))} {SHAPES[shape][1]}")
        print(f"{'kernel':<46} {'grid':>14} {'regs':>4} {'us':>6} {'MB':>6} {'act mean':>8} {'act max':>7} "
              + " ".join(f"{k:>7}" for k in COLUMNS))  # fmt: skip
        continue
    if "elementwise_kernel" not in name:  # cuDNN's and our kernels by name, torch's elementwise by functor
        name = name.split("<")[0]
    elapsed = number(r, "sm__cycles_elapsed.avg") or 1.0
    print(f"{name[-46:]:<46} {r['Grid Size']:>14} {number(r, 'launch__registers_per_thread'):4.0f} "
          f"{number(r, 'gpu__time_duration.sum') / 1e3:6.1f} "
          f"{(number(r, 'dram__bytes_read.sum') + number(r, 'dram__bytes_write.sum')) / 1e6:6.2f} "
          f"{number(r, 'sm__cycles_active.avg') / elapsed:8.2f} {number(r, 'sm__cycles_active.max') / elapsed:7.2f} "
          + " ".join(f"{number(r, m):7.2f}" for m in COLUMNS.values()))  # fmt: skip
