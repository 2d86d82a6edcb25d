"""ab.sh's sides from its bench logs (each side's run was cut at 60 s, before bench wrote its CSV): per case the best
of the two rounds, each side's time over A's, and the geometric means over the cases every side ran.

    python ab_logs.py DIR     # DIR: ab.sh's $OUT (ab_<side>_r<round>.log)
"""

import collections
import math
import re
import sys

LINE = re.compile(r"^\[\d+/\d+\] batch_norm_2d_(\S+) (\S+) (\S+): ours ([\d.]+)")
SIDES = ("A", "B", "B2")
times: dict[tuple[str, str, str], dict[str, float]] = collections.defaultdict(dict)
for side in SIDES:
    for round_ in (1, 2):
        with open(f"{sys.argv[1]}/ab_{side}_r{round_}.log") as f:
            for m in filter(None, map(LINE.match, f)):
                case, us = m.groups()[:3], float(m.group(4))
                times[case][side] = min(us, times[case].get(side, math.inf))
common = {case: t for case, t in sorted(times.items()) if all(s in t for s in SIDES)}
print(f"{'op':<36} {'shape':<15} {'dtype':<9} {'A us':>7} {'B/A':>6} {'B2/A':>6}")
for (op, shape, dtype), t in common.items():
    print(f"{op:<36} {shape:<15} {dtype:<9} {t['A']:7.1f} {t['B'] / t['A']:6.3f} {t['B2'] / t['A']:6.3f}")
for side in SIDES[1:]:
    mean = math.exp(sum(math.log(t[side] / t["A"]) for t in common.values()) / len(common))
    print(f"geomean {side}/A {mean:.3f} over {len(common)} cases")
