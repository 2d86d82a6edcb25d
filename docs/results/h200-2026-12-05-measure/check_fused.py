"""Cross-checks every check case that launches a one-launch NCHW training kernel (batch_norm_2d_fused_forward and
batch_norm_2d_fused_backward, with or without an activation) against the float64 references.

    python check_fused.py cuda    # on the GPU (the sm_90 wheel installed)
    python check_fused.py host    # here, in the emulator (checked mode)
"""

import sys

from rust_kernels import check
from rust_kernels.runtime import Plan

FUSED = ("BatchNorm2dFusedForward", "BatchNorm2dFusedBackward")


def fused(plan: Plan) -> bool:
    names = [type(launch.kernel).__name__ for launch in plan.launches]
    return any(n.startswith(FUSED) and "ChannelsLast" not in n for n in names)


results = check.run(sys.argv[1], where=fused)
failed = [r for r in results if not r.passed]
print(f"{len(results)} cases, {len(failed)} failed")
sys.exit(1 if failed else 0)
