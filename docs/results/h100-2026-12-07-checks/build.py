"""This run's kernels, sm_90, exported to DEST (carried as rkc.tar.xz; this session's built with
packed_coefficients.patch applied): every catalogue kernel in f32 and bf16-f32 (bf16 where a kernel has no bf16-f32
instance), the tuner's dtype keys; and every dtype key of the kernels whose GPU check is pending: those that call
grid::sync (spec `cooperative`), the three whose coefficients come in packs, and the grouped eval backward
(../h100-2026-12-07-act-groups/build.py's).

    python build.py DEST && tar cf - -C DEST kernels by-source | xz -T2 -6 > rkc.tar.xz
"""

import sys
from pathlib import Path

from rust_kernels import builder, cache, kernels

EVERY_DTYPE = (
    "batch_norm_2d_frozen_forward_channels_last",
    "batch_norm_2d_frozen_forward_act",
    "batch_norm_2d_frozen_forward_add_relu",
    "batch_norm_2d_frozen_backward_grouped",
    "batch_norm_2d_frozen_backward_grouped_act",
)

if __name__ == "__main__":
    every = kernels.instances()
    mixed = {k.name for k in every if k.dtype_key == "bf16-f32"}
    wanted = [
        k
        for k in every
        if k.dtype_key in ("f32", "bf16-f32")
        or (k.dtype_key == "bf16" and k.name not in mixed)
        or k.name in EVERY_DTYPE
        or k.spec.cooperative
    ]
    cache.export(builder.cached_entries([(k, "sm_90") for k in wanted], builder.default_jobs()), Path(sys.argv[1]))
    print(f"{len(wanted)} kernels in {sys.argv[1]}")
