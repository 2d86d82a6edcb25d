"""Every catalogue kernel in f32 and bf16-f32 (the models under autocast, the probes), the bf16 ones of the kernels
that have no bf16-f32 instance (their spec has no parameters' dtype: add_relu_mask under autocast) and the grouped
eval backward in every dtype key (its GPU check and sanitizer run), sm_90, exported to DEST: the device call's
kernels, carried as rkc.tar.xz (go.sh).

    python build.py DEST && tar cf - -C DEST kernels by-source | xz -T2 > rkc.tar.xz
"""

import sys
from pathlib import Path

from rust_kernels import builder, cache, kernels

if __name__ == "__main__":
    every = kernels.instances()
    mixed = {k.name for k in every if k.dtype_key == "bf16-f32"}
    wanted = [k for k in every if k.dtype_key in ("f32", "bf16-f32") or (k.dtype_key == "bf16" and k.name not in mixed)
              or k.name == "batch_norm_2d_frozen_backward_grouped"]  # fmt: skip
    cache.export(builder.cached_entries([(k, "sm_90") for k in wanted], builder.default_jobs()), Path(sys.argv[1]))
    print(f"{len(wanted)} kernels in {sys.argv[1]}")
