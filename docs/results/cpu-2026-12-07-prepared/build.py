"""This session's kernels, sm_90, exported to DEST (carried as rkc.tar.xz): every catalogue kernel in the tuner's
dtype keys (f32 and bf16-f32; bf16 where a kernel has no bf16-f32 instance), for an H200 tune, and every instance the
GPU check of the eval-mode fused ops launches (BN + activation, BN + add + ReLU; every dtype key), for an H100.

    python build.py DEST && tar cf - -C DEST kernels by-source | xz -T2 -6 > rkc.tar.xz
"""

import sys
from pathlib import Path

from rust_kernels import builder, cache, check, kernels
from rust_kernels.registry import families

EVAL_FUSED = (
    "batch_norm_2d_act_eval_forward",
    "batch_norm_2d_act_eval_backward",
    "batch_norm_2d_add_relu_eval_forward",
    "batch_norm_2d_add_relu_eval_backward",
)

if __name__ == "__main__":
    every = kernels.instances()
    mixed = {k.name for k in every if k.dtype_key == "bf16-f32"}
    tuned = [k for k in every if k.dtype_key in ("f32", "bf16-f32") or (k.dtype_key == "bf16" and k.name not in mixed)]
    checked = [f for f in families() if f.name in EVAL_FUSED]
    launched = [launch.kernel for _, plan, _ in check.cases("cuda", checked) for launch in plan.launches]
    wanted = list(dict.fromkeys(tuned + launched))
    cache.export(builder.cached_entries([(k, "sm_90") for k in wanted], builder.default_jobs()), Path(sys.argv[1]))
    print(f"{len(wanted)} kernels in {sys.argv[1]}")
