"""Wall time of building the same kernels for the host emulator one at a time and `jobs` at a time, each in an empty
kernel cache (so each worker's cargo target directory first builds cuda_std).
Usage: PYTHONPATH=python python3 docs/results/cpu-2026-12-05-host-side/parallel_builds.py [COUNT] [JOBS]"""

import os
import sys
import tempfile
import time

from rust_kernels import builder
from rust_kernels.kernels import instances

count = int(sys.argv[1]) if len(sys.argv) > 1 else 24
jobs = int(sys.argv[2]) if len(sys.argv) > 2 else builder.default_jobs()
kernels = [k for k in instances() if k.dtype == "f32"][:count]
for n in (1, jobs):
    with tempfile.TemporaryDirectory() as cache:
        os.environ["RUST_KERNELS_CACHE_DIR"] = cache
        os.environ["RUST_KERNELS_QUIET"] = "1"
        start = time.perf_counter()
        builder.cached_entries([(k, builder.HOST) for k in kernels], n)
        print(f"{len(kernels)} host builds, {n} at a time: {time.perf_counter() - start:.1f} s", flush=True)
