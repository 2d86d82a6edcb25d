"""../h100-2026-12-07-e2e/build.py's kernels (every catalogue kernel in f32 and bf16-f32, the bf16 ones of kernels with
no bf16-f32 instance, the grouped eval backward in every dtype key) and the grouped eval backward through an
activation (batch_norm_2d_frozen_backward_grouped_act, new) in every dtype key, sm_90, exported to DEST: go.sh's
kernels, carried as rkc.tar.xz.

    python build.py DEST && tar cf - -C DEST kernels by-source | xz -T2 > rkc.tar.xz
"""

import sys
from pathlib import Path

from rust_kernels import builder, cache, kernels

GROUPED = ("batch_norm_2d_frozen_backward_grouped", "batch_norm_2d_frozen_backward_grouped_act")

if __name__ == "__main__":
    every = kernels.instances()
    mixed = {k.name for k in every if k.dtype_key == "bf16-f32"}
    wanted = [k for k in every if k.dtype_key in ("f32", "bf16-f32") or (k.dtype_key == "bf16" and k.name not in mixed)
              or k.name in GROUPED]  # fmt: skip
    cache.export(builder.cached_entries([(k, "sm_90") for k in wanted], builder.default_jobs()), Path(sys.argv[1]))
    print(f"{len(wanted)} kernels in {sys.argv[1]}")
