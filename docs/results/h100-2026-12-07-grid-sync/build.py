"""Every instance of the kernels that call grid::sync (the persistent and cooperative channels_last training kernels:
spec `cooperative = true`), sm_90, exported to DEST. `--dtype KEY ...`: only those dtype keys. go.sh's carried cache
holds them built twice: from before/ copied over rust_kernels/cuda_std/src (side A, f32 and bf16-f32) and from the
tree as committed (side B, every dtype key).

    python build.py DEST [--dtype KEY ...]
"""

import argparse
from pathlib import Path

from rust_kernels import builder, cache, kernels

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("dest", type=Path)
    parser.add_argument("--dtype", nargs="+")
    args = parser.parse_args()
    wanted = [k for k in kernels.instances() if k.spec.cooperative and (not args.dtype or k.dtype_key in args.dtype)]
    cache.export(builder.cached_entries([(k, "sm_90") for k in wanted], builder.default_jobs()), args.dest)
    print(f"{len(wanted)} kernels in {args.dest}")
