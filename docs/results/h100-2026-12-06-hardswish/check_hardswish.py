"""The GPU check of the check cases whose plan launches a Hardswish kernel (ACTIVATION = 4: the training and eval
activation families, every dtype key, both memory formats) against the float64 references within the families'
tolerances (verify_activation.py, verify_frozen_fused.py), until a deadline: first one case for each kernel instance
the cases launch (every instance checked once), then the rest in the check's order. What the deadline leaves is
counted as not run.

    python check_hardswish.py SECONDS   # on the GPU; exit status 1 if any failed
"""

import sys
import time

from rust_kernels import check, registry


def hardswish(plan) -> bool:
    return any(launch.kernel.consts.get("ACTIVATION") == 4 for launch in plan.launches)


def main(seconds: float) -> int:
    deadline = time.perf_counter() + seconds
    todo = [c for c in check.cases("cuda", registry.families()) if hardswish(c[1])]
    seen: set[str] = set()
    first, rest = [], []
    for case in todo:
        ids = {launch.kernel.id for launch in case[1].launches}
        (rest if ids <= seen else first).append(case)
        seen |= ids
    results = []
    for family, plan, shape in first + rest:
        if time.perf_counter() > deadline:
            break
        result = check.check_one(family, plan, shape, "cuda")
        if not result.passed:
            print(f"FAIL {family.name}: {plan.label} {shape}: {result.error or check.figures(result)}", flush=True)
        results.append(result)
    check.report(results)
    kernels = {launch.kernel.id for _, plan, _ in (first + rest)[: len(results)] for launch in plan.launches}
    print(f"{len(results)} of {len(todo)} cases run ({len(first)} cover every one of the {len(seen)} kernels: "
          f"{len(kernels)} launched), {len(todo) - len(results)} not run (deadline)")  # fmt: skip
    return 1 if any(not r.passed for r in results) else 0


if __name__ == "__main__":
    sys.exit(main(float(sys.argv[1])))
