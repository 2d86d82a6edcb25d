"""`python -m rust_kernels tune` with the training ops' candidates cut to the kernels that call grid::sync (the
persistent and cooperative channels_last kernels), so that a run times only them: go.sh runs it once with side A's
build of them and once with side B's, each into an empty tuning cache. Every shape given must have such candidates.

    python ab.py TUNE_ARGS...
"""

import runpy
import sys

from rust_kernels.families.batch_norm import training

every = training._candidates


def grid_sync_only(*args, **kwargs):
    return tuple(p for p in every(*args, **kwargs) if all(launch.kernel.spec.cooperative for launch in p.launches))


training._candidates = grid_sync_only
sys.argv = ["python -m rust_kernels", "tune", *sys.argv[1:]]
runpy.run_module("rust_kernels", run_name="__main__", alter_sys=True)
