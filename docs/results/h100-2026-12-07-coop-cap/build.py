"""Every instance of the cooperative kernels (each dtype key, for `check`), sm_90, exported to DEST. go.sh's carried
cache holds ../h100-2026-12-07-act-groups/build.py's kernels and this, each run twice: with the tree as committed and
with capped/ copied over codegen/batch_norm/.

    python build.py DEST
"""

import sys
from pathlib import Path

from rust_kernels import builder, cache, kernels

if __name__ == "__main__":
    wanted = [k for k in kernels.instances() if k.name.startswith("batch_norm_2d_cooperative_")]
    cache.export(builder.cached_entries([(k, "sm_90") for k in wanted], builder.default_jobs()), Path(sys.argv[1]))
    print(f"{len(wanted)} kernels in {sys.argv[1]}")
