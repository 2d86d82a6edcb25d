"""Builds here, for sm_90, the row kernels the GPU run (run.sh) launches besides the sweep's (`sweep.py build`):
every plan of examples/rows/run.py's checks (f32, f64, bf16, f16) and of its benchmark (f32, bf16). Into
RUST_KERNELS_CACHE_DIR, which is then carried (the GPU machine has no Rust)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples" / "rows"))
import run

import rust_kernels
from rust_kernels.dtypes import DTYPES

kernels = []
for case in run.CASES:
    for dtype in ("f32", "f64", "bf16", "f16"):
        lanes = 16 // DTYPES[dtype].numpy_dtype().itemsize
        columns = [n for _, n in run.CHECK_SHAPES] + (run.BENCH_COLUMNS if dtype in ("f32", "bf16") else [])
        for n in columns:
            threads, consts = run.plan(case, n, lanes)
            kernels.append(run.kernel_for(case, dtype, threads, consts))
unique = list(dict.fromkeys(kernels))
for i, kernel in enumerate(unique):
    rust_kernels.build(kernel, "sm_90")
    print(f"\r{i + 1}/{len(unique)} {kernel.id}", end="", flush=True)
print()
