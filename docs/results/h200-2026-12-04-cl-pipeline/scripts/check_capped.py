"""GPU cross-check of every check case (check.cases, the families' own plans and shapes) whose plan launches a
kernel with a register cap (a [[registers]] entry that applies: builder.performance_directives names .maxnreg).

    python check_capped.py batch_norm_2d_backward,batch_norm_2d_act_backward,batch_norm_2d_add_relu_backward
"""

import sys
import time

from rust_kernels import builder, check, registry


def capped(plan) -> bool:
    return any(".maxnreg" in builder.performance_directives(launch.kernel) for launch in plan.launches)


def main(names: list[str]) -> None:
    families = [f for f in registry.families() if f.name in names]
    todo = [c for c in check.cases("cuda", families) if capped(c[1])]
    print(len(todo), "cases launching a capped kernel", flush=True)
    start = time.time()
    results = []
    for family, plan, shape in todo:
        result = check.check_one(family, plan, shape, "cuda")
        if not result.passed:
            print("FAIL", family.name, plan.label, shape, result.error or check.figures(result), flush=True)
        results.append(result)
    check.report(results)
    print(f"{time.time() - start:.0f} s")


if __name__ == "__main__":
    main(sys.argv[1].split(","))
