"""The device math library's errors, measured: each function of cuda_std's GpuFloat and FastMath evaluated by the
math_eval kernel over its domain, against mpmath at 40 digits, in ulps of the result's format.

    python examples/math/ulp.py                          # in the host emulator
    python examples/math/ulp.py --backend cuda --save r.npz --no-measure   # on the GPU: inputs and outputs kept
    python examples/math/ulp.py --load r.npz             # a saved GPU run: its ulps, and whether the emulator
                                                         # gives the same bits on the same inputs

Exit status 1 when a function exceeds its bound in BOUNDS (the figures docs/math.md states).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import mpmath as mp
import numpy as np

import rust_kernels

mp.mp.dps = 40
FUNCTIONS = (
    "exp exp2 exp_m1 ln log2 ln_1p tanh sin cos erf sigmoid rsqrt floor ceil round trunc "
    "exp_fast exp2_fast ln_fast log2_fast tanh_fast sin_fast cos_fast rsqrt_fast recip_fast powf erf_fast"
).split()
FAST = {f for f in FUNCTIONS if f.endswith("_fast")}
NUMPY = {"f32": np.float32, "f64": np.float64}

# Inputs: (lo, hi, "lin" | "log" | "tiny") ranges per function and format; "log" draws |x| log-uniformly.
F32, F64 = "f32", "f64"
DOMAINS: dict[str, dict[str, list[tuple[float, float, str]]]] = {
    "exp": {F32: [(-87.0, 88.5, "lin"), (-1.0, 1.0, "lin")], F64: [(-708.0, 709.5, "lin"), (-1.0, 1.0, "lin")]},
    "exp2": {F32: [(-126.0, 127.5, "lin")], F64: [(-1022.0, 1023.5, "lin")]},
    "exp_m1": {F32: [(-20.0, 80.0, "lin"), (1e-30, 1.0, "log")], F64: [(-40.0, 700.0, "lin"), (1e-300, 1.0, "log")]},
    "ln": {F32: [(1e-37, 1e38, "log"), (0.5, 2.0, "lin")], F64: [(1e-307, 1e308, "log"), (0.5, 2.0, "lin")]},
    "log2": {F32: [(1e-37, 1e38, "log"), (0.5, 2.0, "lin")], F64: [(1e-307, 1e308, "log"), (0.5, 2.0, "lin")]},
    "ln_1p": {F32: [(-0.999, 1e30, "lin"), (1e-30, 1.0, "log")], F64: [(-0.999, 1e300, "lin"), (1e-300, 1.0, "log")]},
    "tanh": {F32: [(-10.0, 10.0, "lin"), (1e-30, 1.0, "log")], F64: [(-20.0, 20.0, "lin"), (1e-300, 1.0, "log")]},
    "sin": {
        F32: [(-100.0, 100.0, "lin"), (-65536.0, 65536.0, "lin")],
        F64: [(-100.0, 100.0, "lin"), (-(2.0**28), 2.0**28, "lin")],
    },
    "cos": {
        F32: [(-100.0, 100.0, "lin"), (-65536.0, 65536.0, "lin")],
        F64: [(-100.0, 100.0, "lin"), (-(2.0**28), 2.0**28, "lin")],
    },
    "erf": {F32: [(-5.0, 5.0, "lin"), (1e-30, 1.0, "log")], F64: [(-7.0, 7.0, "lin"), (1e-300, 1.0, "log")]},
    "sigmoid": {F32: [(-80.0, 80.0, "lin")], F64: [(-700.0, 700.0, "lin")]},
    "rsqrt": {F32: [(1e-37, 1e38, "log")], F64: [(1e-307, 1e308, "log")]},
    "powf": {F32: [(1e-3, 1e3, "log")], F64: [(1e-3, 1e3, "log")]},
    "exp_fast": {F32: [(-80.0, 80.0, "lin"), (-1.0, 1.0, "lin")]},
    "exp2_fast": {F32: [(-120.0, 120.0, "lin")]},
    "ln_fast": {F32: [(1e-30, 0.5, "log"), (2.0, 1e30, "log")]},
    "log2_fast": {F32: [(1e-30, 0.5, "log"), (2.0, 1e30, "log")]},
    "tanh_fast": {F32: [(-10.0, 10.0, "lin"), (1e-30, 1.0, "log")]},
    "sin_fast": {F32: [(-3.1415, 3.1415, "lin")]},
    "cos_fast": {F32: [(-3.1415, 3.1415, "lin")]},
    "rsqrt_fast": {F32: [(1e-30, 1e30, "log")]},
    "recip_fast": {F32: [(1e-30, 1e30, "log")]},
    "erf_fast": {F32: [(-5.0, 5.0, "lin"), (1e-30, 1.0, "log")]},
}
for _name in ("floor", "ceil", "round", "trunc"):
    DOMAINS[_name] = {F32: [(-1e4, 1e4, "lin")], F64: [(-1e9, 1e9, "lin")]}
# The powf exponent, drawn so that |y ln x| stays below the format's overflow.
POWF_Y = {F32: 12.0, F64: 100.0}

# Largest error allowed, in ulps, over the domains above (docs/math.md has the measured figures). sin_fast and
# cos_fast are bounded absolutely, as PTX states their error (on [-pi, pi]); ln_fast and log2_fast are measured away
# from 1, where their error is absolute too.
BOUNDS = {
    F32: {"exp": 1.0, "exp2": 1.0, "exp_m1": 2.0, "ln": 1.0, "log2": 1.0, "ln_1p": 2.5, "tanh": 2.0, "sin": 1.5,
          "cos": 1.5, "erf": 2.0, "sigmoid": 2.0, "rsqrt": 1.5, "powf": 2.0, "floor": 0.0, "ceil": 0.0, "round": 0.0,
          "trunc": 0.0, "exp_fast": 4.0, "exp2_fast": 4.0, "ln_fast": 4.0, "log2_fast": 4.0, "tanh_fast": 8192.0,
          "rsqrt_fast": 4.0, "recip_fast": 2.0, "erf_fast": 2.0},
    F64: {"exp": 1.0, "exp2": 1.0, "exp_m1": 2.0, "ln": 1.0, "log2": 1.0, "ln_1p": 2.5, "tanh": 2.0, "sin": 1.5,
          "cos": 1.5, "erf": 2.0, "sigmoid": 2.0, "rsqrt": 1.5, "powf": 2.5, "floor": 0.0, "ceil": 0.0, "round": 0.0,
          "trunc": 0.0},
}  # fmt: skip
ABSOLUTE = {"sin_fast": 2.0**-20, "cos_fast": 2.0**-20}


# The limits: every function at the infinities, NaN and both zeros (powf's special cases are tested in cuda_std),
# against numpy's float64 functions (C99 Annex F), bit for bit but for NaN's payload.
SPECIALS = (-np.inf, np.inf, np.nan, -0.0, 0.0)
with np.errstate(all="ignore"):
    LIMITS = {
        "exp": np.exp, "exp2": np.exp2, "exp_m1": np.expm1, "ln": np.log, "log2": np.log2, "ln_1p": np.log1p,
        "tanh": np.tanh, "sin": np.sin, "cos": np.cos, "erf": np.vectorize(math.erf, otypes=[float]),
        "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "rsqrt": lambda x: 1 / np.sqrt(x), "floor": np.floor,
        "ceil": np.ceil, "round": np.round, "trunc": np.trunc, "recip": lambda x: 1 / x,
    }  # fmt: skip


LIMITED = [f for f in FUNCTIONS if f != "powf"]


def limits_missed(func: str, dtype: str, got: np.ndarray) -> list[str]:
    """The special inputs (SPECIALS) where `got` is not the function's limit."""
    x = np.array(SPECIALS)
    with np.errstate(all="ignore"):
        want = LIMITS[func.removesuffix("_fast")](x).astype(NUMPY[dtype])
    same = (got.view(f"u{got.itemsize}") == want.view(f"u{want.itemsize}")) | (np.isnan(got) & np.isnan(want))
    return [f"{func}({a}) = {g}, not {w}" for a, g, w, ok in zip(x, got, want, same, strict=True) if not ok]


def _mp_round(x: mp.mpf) -> mp.mpf:
    return mp.sign(x) * mp.floor(abs(x) + mp.mpf(0.5))


REFERENCE = {
    "exp": mp.exp, "exp2": lambda x: mp.power(2, x), "exp_m1": mp.expm1, "ln": mp.log, "log2": lambda x: mp.log(x, 2),
    "ln_1p": mp.log1p, "tanh": mp.tanh, "sin": mp.sin, "cos": mp.cos, "erf": mp.erf,
    "sigmoid": lambda x: 1 / (1 + mp.exp(-x)), "rsqrt": lambda x: 1 / mp.sqrt(x), "floor": mp.floor,
    "ceil": mp.ceil, "round": _mp_round, "trunc": lambda x: mp.sign(x) * mp.floor(abs(x)), "recip": lambda x: 1 / x,
}  # fmt: skip


def reference(func: str, x: float, y: float) -> mp.mpf:
    if func == "powf":
        return mp.power(mp.mpf(x), mp.mpf(y))
    return REFERENCE[func.removesuffix("_fast")](mp.mpf(x))


def inputs(func: str, dtype: str, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """n inputs over the function's ranges (and the powf exponents), deterministic per function and seed."""
    rng = np.random.default_rng([seed, FUNCTIONS.index(func), dtype == F64])
    ranges = DOMAINS[func][dtype]
    parts = []
    for k, (lo, hi, kind) in enumerate(ranges):
        m = n // len(ranges) + (k < n % len(ranges))
        if kind == "lin":
            parts.append(rng.uniform(lo, hi, m))
        else:
            signs = 1.0 if func in ("ln", "log2", "rsqrt", "powf", "ln_fast", "log2_fast", "rsqrt_fast") else None
            magnitude = np.exp(rng.uniform(np.log(lo), np.log(hi), m))
            parts.append(magnitude * (signs or rng.choice([-1.0, 1.0], m)))
    x = np.concatenate(parts).astype(NUMPY[dtype])
    y = np.ones_like(x)
    if func == "powf":
        limit = POWF_Y[dtype]
        y = rng.uniform(-limit, limit, x.size).astype(NUMPY[dtype])
        y[: x.size // 8] = np.round(y[: x.size // 8])  # integral exponents too
    return x, y


def ulps(func: str, dtype: str, x: np.ndarray, y: np.ndarray, got: np.ndarray) -> np.ndarray:
    """|got - f(x)| in ulps of the format at f(x) (absolute error for the fast variants of ABSOLUTE)."""
    out = np.empty(x.size)
    for i, (a, b, g) in enumerate(zip(x.tolist(), y.tolist(), got.tolist(), strict=True)):
        want = reference(func, a, b)
        if func in ABSOLUTE:
            out[i] = float(abs(mp.mpf(g) - want))
            continue
        spacing = float(np.spacing(abs(NUMPY[dtype](float(want)))))
        out[i] = float(abs(mp.mpf(g) - want) / mp.mpf(spacing)) if spacing > 0 else float("inf")
    return out


def evaluate(backend: str, dtype: str, data: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, np.ndarray]:
    """Every function's outputs on its inputs, from one math_eval kernel (host emulator or GPU)."""
    program = rust_kernels.Program(Path(__file__).resolve().parent)
    kernel = program.kernel("math_eval", dtype=dtype)
    fn = rust_kernels.compile(kernel, target="host" if backend == "host" else "ptx").get_kernel()
    out = {}
    for func, (x, y) in data.items():
        result = np.zeros_like(x)
        grid = (x.size + 255) // 256
        args = (x, y, result, x.size, FUNCTIONS.index(func))
        if backend == "cuda":
            from rust_kernels import arrays

            x_d, y_d, r_d = (arrays.to_device(a) for a in (x, y, result))
            fn.launch(grid, 256, (x_d, y_d, r_d, x.size, FUNCTIONS.index(func)))
            result = arrays.to_host(r_d)
        else:
            fn.launch(grid, 256, args)
        out[func] = result
    return out


def functions_of(dtype: str) -> list[str]:
    return [f for f in FUNCTIONS if dtype in DOMAINS[f]]


def report(dtype: str, data: dict, got: dict, same: dict | None = None) -> tuple[list[str], int]:
    """Markdown rows (function, inputs, max and mean error, bound, bit-identical to the emulator) and failures."""
    rows, failures = [], 0
    for func in functions_of(dtype):
        x, y = data[func]
        err = ulps(func, dtype, x, y, got[func])
        bound = ABSOLUTE.get(func, BOUNDS[dtype].get(func, float("inf")))
        ok = bool(err.max() <= bound)
        failures += not ok
        unit = "abs" if func in ABSOLUTE else "ulp"
        worst = f"{err.max():.2e} abs" if unit == "abs" else f"{err.max():.3f}"
        mean = f"{err.mean():.2e}" if unit == "abs" else f"{err.mean():.3f}"
        ident = "" if same is None else f" {same[func]:.4f} |"
        ranges = ", ".join(f"[{lo:g}, {hi:g}]{'' if k == 'lin' else ' ' + k}" for lo, hi, k in DOMAINS[func][dtype])
        rows.append(f"| {dtype} | {func} | {ranges} | {worst} | {mean} | {bound:g} |{ident} {'ok' if ok else 'OVER'} |")
    return rows, failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=("host", "cuda"), default="host")
    parser.add_argument("--n", type=int, default=2048, help="inputs per function and dtype")
    parser.add_argument("--dtype", nargs="+", default=[F32, F64])
    parser.add_argument("--save", type=Path, help="keep the inputs and outputs (npz)")
    parser.add_argument("--load", type=Path, help="a saved run: report it and compare the emulator's bits")
    parser.add_argument("--no-measure", action="store_true", help="only evaluate (and --save): no mpmath here")
    options = parser.parse_args(argv)

    saved = dict(np.load(options.load)) if options.load else {}
    keep: dict[str, np.ndarray] = {}
    failures = 0
    header = "| dtype | function | inputs | max err | mean err | bound | ok |"
    if options.load:
        header = "| dtype | function | inputs | max err | mean err | bound | same bits as emulator | ok |"
    if not options.no_measure:
        print(header)
        print("|" + "---|" * (header.count("|") - 1))
    for dtype in options.dtype:
        funcs = functions_of(dtype)
        if options.load:
            data = {f: (saved[f"{dtype}/{f}/x"], saved[f"{dtype}/{f}/y"]) for f in funcs}
            got = {f: saved[f"{dtype}/{f}/out"] for f in funcs}
            host = evaluate("host", dtype, data)
            same = {f: float(np.mean(host[f].view(f"u{host[f].itemsize}") == got[f].view(f"u{got[f].itemsize}")))
                    for f in funcs}  # fmt: skip
            limits = {f: saved[f"{dtype}/{f}/limits"] for f in funcs if f in LIMITED}
        else:
            data = {f: inputs(f, dtype, options.n) for f in funcs}
            got = evaluate(options.backend, dtype, data)
            special = np.array(SPECIALS, NUMPY[dtype])
            limits = evaluate(options.backend, dtype, {f: (special, np.ones_like(special)) for f in funcs
                                                       if f in LIMITED})  # fmt: skip
            same = None
        for f in funcs:
            keep |= {f"{dtype}/{f}/x": data[f][0], f"{dtype}/{f}/y": data[f][1], f"{dtype}/{f}/out": got[f]}
        keep |= {f"{dtype}/{f}/limits": out for f, out in limits.items()}
        if not options.no_measure:
            rows, failed = report(dtype, data, got, same)
            missed = [m for f, out in limits.items() for m in limits_missed(f, dtype, out)]
            failures += failed + len(missed)
            print("\n".join(rows), flush=True)
            print("\n".join(f"{dtype} limit missed: {m}" for m in missed) or f"{dtype}: every limit met", flush=True)
    if options.save:
        np.savez_compressed(options.save, **keep)
    if options.no_measure:  # nothing was compared: say so rather than report bounds as met
        evaluated = sum(k.endswith("/out") for k in keep)
        print(f"evaluated {evaluated} functions x dtypes on {options.backend}; not measured (--no-measure)"
              + (f", saved to {options.save}" if options.save else ""))  # fmt: skip
        return 0
    print(f"{'all within bounds' if not failures else f'{failures} OVER their bounds'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
