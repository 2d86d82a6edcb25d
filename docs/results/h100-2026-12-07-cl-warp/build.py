"""Every instance of the channels_last warp kernels and of the add + ReLU mask kernel (which the checks' add + ReLU
backward plans launch before them), sm_90, exported to DEST: added to go.sh's carried cache for `check` and
`sanitize` in every dtype key.

    python build.py DEST
"""

import sys
from pathlib import Path

from rust_kernels import builder, cache, kernels

NAMES = ("batch_norm_2d_warp_forward_channels_last", "batch_norm_2d_warp_forward_channels_last_act",
         "batch_norm_2d_warp_backward_channels_last", "batch_norm_2d_warp_backward_channels_last_act",
         "batch_norm_2d_add_relu_mask")  # fmt: skip

if __name__ == "__main__":
    wanted = [k for k in kernels.instances() if k.name in NAMES]
    cache.export(builder.cached_entries([(k, "sm_90") for k in wanted], builder.default_jobs()), Path(sys.argv[1]))
    print(f"{len(wanted)} kernels in {sys.argv[1]}")
