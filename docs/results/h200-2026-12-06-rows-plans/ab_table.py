"""Old plans (HEAD 346d3a9's run.plan; bf16's exact GELU: erf_fast, before/) against run.plan's, per kernel and
dtype over 512-16384 columns, read from sweep.log files (the same process, fractions of a copy):

    cd docs/results/h200-2026-12-06-rows-plans && python ab_table.py device/*/sweep.log
"""

import math
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "examples" / "rows"))
sys.path.insert(0, str(ROOT / "python"))
import run  # noqa: E402


def pow2(v: float) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1.0, v))))


def old_plan(case, n: int, lanes: int) -> str:
    if not case.tiled:
        return f"{max(64, min(512, pow2(n / (4 * lanes))))}x-x1"
    t = max(32, min(1024, pow2(n / (16 if n <= 2048 else 32))))
    return f"{t}x{min(32, max(8, lanes, pow2(n / t)))}x1"


def new_plan(case, n: int, lanes: int) -> str:
    t, c = run.plan(case, n, lanes)
    return f"{t}x{c.get('elements', '-')}x{c['rows']}"


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]  # the upper one of six, as run.py's summary


def main() -> None:
    for path in sys.argv[1:]:
        print(path)
        cells = {}
        for line in Path(path).read_text().splitlines():
            m = re.match(r"(.+?) (f32|bf16) (\d+) copy=\S+ (.*)", line.strip())
            if m:
                cells[(m.group(1), m.group(2), int(m.group(3)))] = dict(kv.split("=") for kv in m.group(4).split())
        for case in run.CASES:
            for dtype, lanes in (("f32", 4), ("bf16", 8)):
                olds, news = [], []
                for n in run.BENCH_COLUMNS:
                    c = cells[(case.label, dtype, n)]
                    old = old_plan(case, n, lanes)
                    if case.label == "bias_gelu approximate=0" and dtype == "bf16":
                        old = "before:" + old.split("x")[0]
                    olds.append(float(c[old]))
                    news.append(float(c[new_plan(case, n, lanes)]))
                old_cells, new_cells = " ".join(f"{v:.3f}" for v in olds), " ".join(f"{v:.3f}" for v in news)
                print(f"  {case.label:<26}{dtype:<5} old {old_cells} (median {median(olds):.3f}) | "
                      f"new {new_cells} (median {median(news):.3f})")  # fmt: skip


if __name__ == "__main__":
    main()
