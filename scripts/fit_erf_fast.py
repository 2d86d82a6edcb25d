#!/usr/bin/env python3
"""The fits behind cuda_std's erf_fast on f32 (rust_kernels/cuda_std/src/math.rs, ERF_FAST_NEAR and ERF_FAST_FAR):
Chebyshev fits by mpmath, printed constant term first.

- |x| < SPLIT: erf(x) / x as a polynomial in z = x^2 (erf_fast adds its constant term's excess over 1 to 1 as
  x + x (P(z) - 1), so the leading term stays exact).
- SPLIT <= |x| < ONE: log2(erfc(x)) as a polynomial in |x|; erf_fast is 1 - ex2.approx of it. erfc is at most
  erfc(1) / erf(1) = 0.19 of erf there, which shrinks the fit's and ex2.approx's errors in erf's ulps.

    python scripts/fit_erf_fast.py
"""

import mpmath as mp

mp.mp.dps = 40
SPLIT, ONE = 1.0, 4.0  # ONE: where cuda_std's erf returns +-1 in f32
NEAR_DEGREE, FAR_DEGREE = 6, 8  # with SPLIT: every f32 within 1.13 ulps (emulator; docs/math.md)


def near(z: mp.mpf) -> mp.mpf:
    return mp.erf(mp.sqrt(z)) / mp.sqrt(z) if z > 0 else 2 / mp.sqrt(mp.pi)


def far(x: mp.mpf) -> mp.mpf:
    return mp.log(mp.erfc(x), 2)


def main() -> None:
    for name, f, interval, degree in (
        ("ERF_FAST_NEAR", near, [0, SPLIT**2], NEAR_DEGREE),
        ("ERF_FAST_FAR", far, [SPLIT, ONE], FAR_DEGREE),
    ):
        coefficients, error = mp.chebyfit(f, interval, degree + 1, error=True)
        print(f"{name}: degree {degree} on {interval}, absolute error {mp.nstr(error, 3)}")
        print("  " + ", ".join(repr(float(c)) for c in coefficients[::-1]))


if __name__ == "__main__":
    main()
