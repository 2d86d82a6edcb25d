"""The GPU check of every check case whose plan launches a kernel the fast sigmoid changed (SiLU over 16-bit
activations: ACTIVATION = 2 in bf16, f16, bf16-f32, f16-f32), against the float64 references within the families'
tolerances.

    python check_silu.py build DEST   # here: those plans' sm_90 kernels, into DEST
    python check_silu.py run          # on the GPU (RUST_KERNELS_CACHE_DIR=DEST); exit status 1 if any failed
"""

import sys
from pathlib import Path

from rust_kernels import builder, cache, check, registry
from rust_kernels.dtypes import DTYPES
from rust_kernels.families.batch_norm.common import split_key


def changed(plan) -> bool:
    return any(launch.kernel.consts.get("ACTIVATION") == 2 and DTYPES[split_key(launch.kernel.dtype_key)[0]].size == 2
               for launch in plan.launches)  # fmt: skip


def build(dest: Path) -> None:
    kernels = {launch.kernel.id: launch.kernel for _, plan, _ in check.cases("cuda", registry.families())
               if changed(plan) for launch in plan.launches}  # fmt: skip
    cache.export(builder.cached_entries([(k, "sm_90") for k in kernels.values()], builder.default_jobs()), dest)
    print(f"{len(kernels)} kernels in {dest}")


def run() -> int:
    results = check.run("cuda", where=changed)
    return 1 if any(not r.passed for r in results) else 0


if __name__ == "__main__":
    sys.exit(build(Path(sys.argv[2])) if sys.argv[1] == "build" else run())
