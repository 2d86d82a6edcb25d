"""GPU cross-check of the (family, plan, shape) cases whose plan label matches a regex (check.cases' order), every
STEP-th of them, until BUDGET seconds have passed."""

import faulthandler
import re
import sys
import time

from rust_kernels import check, registry

faulthandler.dump_traceback_later(30, repeat=True, exit=False)
fams = [f for f in registry.families() if f.name in sys.argv[1].split(",")]
pattern = re.compile(sys.argv[2])
step, budget = int(sys.argv[3]), float(sys.argv[4])
todo = [c for c in check.cases("cuda", fams) if pattern.search(c[1].label)][::step]
print(len(todo), "cases", flush=True)
t = time.time()
results = []
for n, (family, plan, shape) in enumerate(todo):
    if time.time() - t > budget:
        print(f"budget spent after {n} cases", flush=True)
        break
    r = check.check_one(family, plan, shape, "cuda")
    if n < 3 or n % 100 == 0:
        print(f"{n} {time.time() - t:.1f} s {plan.label} {shape}", flush=True)
    if not r.passed:
        print("FAIL", family.name, plan.label, shape, r.error or check.figures(r), flush=True)
    results.append(r)
    faulthandler.dump_traceback_later(30, repeat=True, exit=False)
check.report(results)
print(f"{time.time() - t:.0f} s")
