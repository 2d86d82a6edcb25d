"""RMSNorm forward as a user's own kernel: spec + template in this directory, built, launched and cross-checked
against a float64 NumPy reference with rust_kernels' public API alone.

    python examples/rms_norm/run.py                  # in the host emulator (no GPU needed)
    python examples/rms_norm/run.py --backend cuda   # on the GPU (PyTorch for device arrays)
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

import rust_kernels

EPS = 1e-6
UNIT_ROUNDOFF = {"f32": 2.0**-24, "f64": 2.0**-53, "bf16": 2.0**-24, "f16": 2.0**-24}  # of the accumulation type
STORAGE = {"f32": 0.0, "f64": 0.0, "bf16": 2.0**-8, "f16": 2.0**-11}  # rounding the result to the storage type


def reference(x: np.ndarray, weight: np.ndarray) -> np.ndarray:
    x64, w64 = x.astype(np.float64), weight.astype(np.float64)
    rms = np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + EPS)
    return x64 / rms * w64


def tolerance(y: np.ndarray, dtype: str, n: int, block: int) -> np.ndarray:
    """Each thread adds ceil(n / block) squares (2 roundings each), then 10 levels of reduction: the mean square
    errs by gamma_d relatively, its reciprocal square root by half that plus 4 roundings, and y by 2 more."""
    u = UNIT_ROUNDOFF[dtype]
    depth = math.ceil(n / block) + 12
    rel = depth * u / (1 - depth * u) / 2 + 7 * u
    return (1 + STORAGE[dtype]) * rel * np.abs(y) + STORAGE[dtype] * np.abs(y) + 1e-30


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=("host", "cuda"), default="host")
    parser.add_argument("--dtype", nargs="+", default=["f32", "f64", "bf16", "f16"])
    options = parser.parse_args(argv)

    program = rust_kernels.Program(Path(__file__).resolve().parent)
    rng = np.random.default_rng(0)
    failures = 0
    for dtype in options.dtype:
        for (m, n), block in (((4, 1000), 128), ((3, 31), 32), ((2, 4096), 256)):
            kernel = program.kernel("rms_norm_forward", block=block, dtype=dtype)
            code = rust_kernels.compile(kernel, target="host" if options.backend == "host" else "ptx")
            fn = code.get_kernel()
            storage = kernel.dtype_info.numpy_dtype()
            x = (rng.standard_normal((m, n)) * 3).astype(storage)
            weight = rng.uniform(0.5, 1.5, n).astype(storage)
            y = np.zeros_like(x)
            eps = float(np.float32(EPS)) if kernel.dtype_info.acc == "f32" else EPS
            if options.backend == "cuda":
                from rust_kernels import arrays

                x_d, w_d, y_d = (arrays.to_device(a) for a in (x, weight, y))
                fn.launch(m, block, (x_d, w_d, y_d, m, n, eps))
                y = arrays.to_host(y_d)
            else:
                fn.launch(m, block, (x, weight, y, m, n, eps))
            want = reference(x, weight)
            err = np.abs(y.astype(np.float64) - want)
            worst = float((err / tolerance(want, dtype, n, block)).max())
            ok = worst <= 1.0
            failures += not ok
            print(f"{kernel.id:<32} M={m:<2} N={n:<5} max abs err {err.max():.2e}  err/tol {worst:.3f}  "
                  f"{'PASS' if ok else 'FAIL'}")  # fmt: skip
    print(f"{'all passed' if not failures else f'{failures} FAILED'} ({options.backend})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
