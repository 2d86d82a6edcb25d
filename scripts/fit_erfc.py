#!/usr/bin/env python3
"""The erfc fits behind cuda_std's erf (rust_kernels/cuda_std/src/math.rs, ERFC_FIT): Chebyshev fits by mpmath of
g(x) = erfc(x) exp(x^2) x on [1, X_MAX], as a polynomial in u = 2 (1/x - 1/X_MAX) / (1 - 1/X_MAX) - 1 in [-1, 1]
(well conditioned: the coefficients' magnitudes sum to about g's value). The degree is the least whose relative
error is below the target; prints the map and the coefficients, constant term first.

    python scripts/fit_erfc.py
"""

import mpmath as mp

mp.mp.dps = 40
# Format, X_MAX (erf rounds to 1 beyond it) and the target relative error of g (erf's error is erfc's times at most
# erfc(1) / erf(1) = 0.19, so a fit error under 2^-27 / 2^-55 stays far below half an ulp of erf).
TARGETS = (("f32", 4, 2**-27), ("f64", 6, 2**-55))


def g(x: mp.mpf) -> mp.mpf:
    return mp.erfc(x) * mp.exp(x * x) * x


def main() -> None:
    for name, x_max, target in TARGETS:
        a = mp.mpf(1) / x_max

        def h(u: mp.mpf, a: mp.mpf = a) -> mp.mpf:
            return g(1 / (a + (1 - a) * (u + 1) / 2))

        for degree in range(4, 60):
            coefficients, error = mp.chebyfit(h, [-1, 1], degree + 1, error=True)
            if error / h(1) < target:
                break
        scale = 2 / (1 - a)
        print(f"{name}: degree {degree}, relative error {mp.nstr(error / h(1), 3)}")
        print(f"  u = t * {mp.nstr(scale, 17)} + {mp.nstr(-(2 * a / (1 - a) + 1), 17)}, t = 1/x")
        print("  " + ", ".join(repr(float(c)) for c in coefficients[::-1]))


if __name__ == "__main__":
    main()
