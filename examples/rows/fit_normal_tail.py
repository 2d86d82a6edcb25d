#!/usr/bin/env python3
"""The fit behind bias_gelu.rs.j2's exact GELU in 16-bit dtypes: log2 Phi(-t), Phi the standard normal CDF, as a
degree-6 polynomial on [0, CUTOFF] (a Chebyshev fit by mpmath), printed highest coefficient first, and its error
evaluated as the kernel does (Horner in f32) on a fine grid against mpmath.

The kernel takes Phi(-|u|) = 2^R(|u|) (ex2.approx), 0 past CUTOFF (Phi(-5.5) = 1.9e-8, below an f32 rounding of
|u|), and Phi(u) = 1 - Phi(-u) for u >= 0: one exponential and seven fused multiply-adds where erf_fast takes two
fits, the exponential and a select.

    python examples/rows/fit_normal_tail.py
"""

import mpmath as mp
import numpy as np

mp.mp.dps = 40
CUTOFF, DEGREE = 5.5, 6


def log2_tail(t: mp.mpf) -> mp.mpf:
    return mp.log(mp.ncdf(-t), 2)


def horner_f32(coefficients: list[float], t: np.ndarray) -> np.ndarray:
    acc = np.zeros_like(t)
    for c in coefficients:
        acc = (acc * t + np.float32(c)).astype(np.float32)  # a fused multiply-add rounds once: this errs more
    return acc


def main() -> None:
    coefficients = [float(c) for c in mp.chebyfit(log2_tail, [0, CUTOFF], DEGREE + 1)]
    t = np.linspace(0, CUTOFF, 4001, dtype=np.float32)
    want = np.array([float(log2_tail(mp.mpf(float(v)))) for v in t])
    error = float(np.abs(horner_f32(coefficients, t) - want).max())
    print(f"degree {DEGREE} on [0, {CUTOFF}]: log2 error {error:.3g} (f32 Horner), so Phi(-t) within "
          f"{2**error - 1:.3g} relatively")  # fmt: skip
    print("  " + ", ".join(str(np.float32(c)) for c in coefficients))


if __name__ == "__main__":
    main()
