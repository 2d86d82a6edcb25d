"""Where the cooperative kernels' warps wait, from ncu's source page (go3.sh: `ncu -i coop.ncu-rep --page source --csv
--print-source sass`): per kernel the warp-state samples in total, the instructions holding the most samples with
their largest stall reasons, the samples by kind of instruction, and the share of samples and of executed
instructions before each CTA barrier, call and exit (the kernel's phases: grid::sync is the call that spins).

    python sass_stalls.py device/run3/coop_sass.csv.gz
"""

import csv
import gzip
import sys
from collections import Counter


def kernels(path: str) -> dict[str, list[dict[str, str]]]:
    """The source page's rows, by kernel (each kernel's table follows a "Kernel Name" line)."""
    out: dict[str, list[dict[str, str]]] = {}
    with (gzip.open(path, "rt", newline="") if path.endswith(".gz") else open(path, newline="")) as f:
        rows = list(csv.reader(f))
    i = 0
    while i < len(rows):
        if rows[i] and rows[i][0] == "Kernel Name":
            name, header, i = rows[i][1], rows[i + 1], i + 2
            table = []
            while i < len(rows) and rows[i] and rows[i][0] != "Kernel Name":
                table.append(dict(zip(header, rows[i], strict=False)))
                i += 1
            out[f"{name} #{sum(k.startswith(name) for k in out) + 1}"] = table
        else:
            i += 1
    return out


def number(text: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def main(path: str) -> None:
    for name, table in kernels(path).items():
        reasons = [c for c in table[0] if c.startswith("stall_") and "Not Issued" not in c]
        total = sum(number(r["Warp Stall Sampling (All Samples)"]) for r in table)
        print(f"{name}: {len(table)} instructions, {total:.0f} samples")
        by_reason = Counter({c: sum(number(r[c]) for r in table) for c in reasons})
        print("  by reason: " + ", ".join(f"{c[6:]} {v / total:.0%}" for c, v in by_reason.most_common(6)))
        by_kind = Counter()
        for r in table:
            by_kind[r["Source"].split()[0].split(".")[0] if r["Source"].split() else "?"] += number(
                r["Warp Stall Sampling (All Samples)"])
        print("  by opcode: " + ", ".join(f"{k} {v / total:.0%}" for k, v in by_kind.most_common(8)))
        executed = sum(number(r["Instructions Executed"]) for r in table)
        seen = done = 0.0
        for i, r in enumerate(table):
            seen += number(r["Warp Stall Sampling (All Samples)"])
            done += number(r["Instructions Executed"])
            if r["Source"].split()[:1] and any(m in r["Source"] for m in ("BAR.SYNC", "CALL.REL", "EXIT")):
                if number(r["Instructions Executed"]):
                    print(f"  up to #{i:<5} {r['Source'].strip()[:40]:40} samples {seen / total:6.1%}, "
                          f"instructions {done / executed:6.1%}")
        top = sorted(table, key=lambda r: -number(r["Warp Stall Sampling (All Samples)"]))[:12]
        for r in top:
            samples = number(r["Warp Stall Sampling (All Samples)"])
            why = Counter({c[6:]: number(r[c]) for c in reasons}).most_common(2)
            print(f"  {r['Address']:>6} {samples / total:5.1%} {r['Source'][:60]:60} "
                  + ", ".join(f"{c} {v:.0f}" for c, v in why) + f"  executed {r['Instructions Executed']}")


if __name__ == "__main__":
    main(sys.argv[1])
