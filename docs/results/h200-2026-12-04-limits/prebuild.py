"""Builds here, for sm_90, the example kernels the GPU run of run.sh launches (the GPU machine has no Rust): the
math_eval kernel in f32 and f64, and every row kernel of examples/rows/run.py's checks in bf16 and f16 (softmax
there takes exp_fast). Into RUST_KERNELS_CACHE_DIR, which is then carried."""

import importlib.util
import sys
from pathlib import Path

import rust_kernels
from rust_kernels.dtypes import DTYPES

ROOT = Path(__file__).resolve().parents[3]


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


kernels = [rust_kernels.Program(ROOT / "examples" / "math").kernel("math_eval", dtype=d) for d in ("f32", "f64")]
rows = load(ROOT / "examples" / "rows" / "run.py")
for case in rows.CASES:
    for dtype in ("bf16", "f16"):
        for _, n in rows.CHECK_SHAPES:
            threads, consts = rows.plan(case, n, 16 // DTYPES[dtype].numpy_dtype().itemsize, None)
            kernels.append(rows.kernel_for(case, dtype, threads, consts))
unique = list(dict.fromkeys(kernels))
for i, kernel in enumerate(unique):
    rust_kernels.build(kernel, "sm_90")
    print(f"\r{i + 1}/{len(unique)} {kernel.id}", end="", flush=True)
print()
