"""Medians over the probe's shapes, per kernel, dtype and pack mode: each variant's speed against the kernels as
shipped (base, registers as ptxas picks them) and against torch's kernels.

    python summarise.py probe.log > summary.txt    # and probe_caps_cl.log, probe_caps_nchw.log
"""

import re
import statistics
import sys
from pathlib import Path

ROW = re.compile(r"(\S+)\s+(\(.*?\))\s+(\S+)\s+v(\d)\s+torch\s+([\d.]+)")
CELL = re.compile(r"(\w+)/(\S+)\s+([\d.]+)@(\d+)")


def main(path: str) -> None:
    cases: dict[tuple[str, str, str], list[tuple[float, dict[tuple[str, str], float]]]] = {}
    for line in Path(path).read_text().splitlines():
        if "|" not in line:
            continue
        head, *cells = (p.strip() for p in line.split("|"))
        kernel, _, dtype, vectorized, torch_us = ROW.match(head).groups()
        times = {(m[1], m[2]): float(m[3]) for m in map(CELL.match, cells) if m}
        cases.setdefault((kernel, dtype, vectorized), []).append((float(torch_us), times))
    first = next(iter(cases.values()))[0][1]
    variants = [v for v in first if v != ("base", "-")]
    print("median speed-up over the shapes against base/- (as shipped), and against torch's kernel")
    print(
        f"{'kernel':<22} {'dtype':<5} pack | " + " | ".join(f"{a}/{b:<2}" for a, b in variants) + " | base/- vs torch"
        " | base/80 vs torch"
    )
    for (kernel, dtype, vectorized), rows in cases.items():
        speed = [statistics.median(t[("base", "-")] / t[v] for _, t in rows) for v in variants]
        torch_ratio = [statistics.median(u / t[v] for u, t in rows) for v in (("base", "-"), ("base", "80"))]
        print(
            f"{kernel:<22} {dtype:<5} v{vectorized}   | "
            + " | ".join(f"{s:6.2f}x " for s in speed)
            + " | "
            + " | ".join(f"{r:6.2f}x        " for r in torch_ratio)
        )


if __name__ == "__main__":
    main(sys.argv[1])
