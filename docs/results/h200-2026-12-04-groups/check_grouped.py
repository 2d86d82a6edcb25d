"""GPU cross-check of every check case (check.cases: the families' own plans and shapes) whose plan launches a
reduction over groups of channels (training.GROUPS), against the float64 references and the derived tolerances, as
`python -m rust_kernels run` checks every case."""

import time

from rust_kernels import check, registry
from rust_kernels.families.batch_norm import training

todo = [
    c
    for c in check.cases("cuda", registry.families())
    if any(getattr(launch.kernel, "vectorized", 0) == training.GROUPS for launch in c[1].launches)
]
print(len(todo), "cases launching a GROUPS kernel", flush=True)
start = time.time()
results = []
for family, plan, shape in todo:
    result = check.check_one(family, plan, shape, "cuda")
    if not result.passed:
        print("FAIL", family.name, plan.label, shape, result.error or check.figures(result), flush=True)
    results.append(result)
check.report(results)
passed = sum(r.passed for r in results)
print(f"{passed} passed, {len(results) - passed} failed, {time.time() - start:.0f} s")
