"""Summarises latency.sh's ncu CSV (--page raw): per shape argument, our kernels then torch eager's, each with its
duration, grid x block, registers, warps active, DRAM throughput, instructions and its four largest stall reasons
(percent of active warp cycles)."""

import csv
import sys

with open(sys.argv[1]) as f:
    rows = list(csv.reader(f))
start = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
header, records = rows[start], rows[start + 2 :]
col = {name: i for i, name in enumerate(header)}
stalls = [n for n in header if n.startswith("smsp__warp_issue_stalled_") and n.endswith("_per_warp_active.pct")]


def number(r: list[str], name: str) -> float:
    try:
        return float(r[col[name]].replace(",", ""))
    except (KeyError, ValueError):
        return float("nan")


groups: list[list[list[str]]] = []
previous_ours = False
for r in records:
    ours = r[col["Kernel Name"]].endswith("_entry_point")
    if ours and not previous_ours:
        groups.append([])
    if groups:
        groups[-1].append(r)
    previous_ours = ours
for label, group in zip(sys.argv[2:], groups, strict=False):
    print(f"== {label}")
    for side in (True, False):
        kernels = [r for r in group if r[col["Kernel Name"]].endswith("_entry_point") == side]
        total = sum(number(r, "gpu__time_duration.sum") for r in kernels) / 1e3
        print(f"  {'ours' if side else 'torch'}: {total:.1f} us in {len(kernels)} kernels")
        for r in kernels:
            top = sorted(((number(r, n), n[25:-20]) for n in stalls), reverse=True)[:4]
            print(
                f"    {number(r, 'gpu__time_duration.sum') / 1e3:6.1f} us {r[col['Kernel Name']][:48]:48}"
                f" grid {number(r, 'launch__grid_size'):.0f}x{number(r, 'launch__block_size'):.0f}"
                f" regs {number(r, 'launch__registers_per_thread'):.0f}"
                f" warps {number(r, 'sm__warps_active.avg.pct_of_peak_sustained_active'):.0f}%"
                f" dram {number(r, 'dram__throughput.avg.pct_of_peak_sustained_elapsed'):.0f}%"
                f" inst {number(r, 'smsp__inst_executed.sum'):.0f}"
                f" | " + ", ".join(f"{name} {value:.0f}" for value, name in top)
            )
