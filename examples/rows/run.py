"""Row kernels written with rust_kernels' public API alone (cuda_std's row, reduce and math modules): bias + GELU,
softmax, LayerNorm and RMSNorm forward over a row-major [M, N] x. Each is cross-checked against a float64 NumPy
reference within an error bound derived from its arithmetic; on the GPU, --bench times it against PyTorch eager,
torch.compile of the same maths and a copy of the same bytes.

    python examples/rows/run.py                         # every kernel and dtype in the host emulator
    python examples/rows/run.py --backend cuda          # on the GPU (PyTorch for device arrays)
    python examples/rows/run.py --backend cuda --bench rows.csv   # and the benchmark, one CSV row per case
"""

from __future__ import annotations

import argparse
import csv
import functools
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import rust_kernels
from rust_kernels.dtypes import DTYPES

EPS = 1e-5
# The unit roundoff of the accumulation type, and of rounding the result to the storage type.
UNIT = {"f32": 2.0**-24, "f64": 2.0**-53, "bf16": 2.0**-24, "f16": 2.0**-24}
STORAGE = {"f32": 0.0, "f64": 0.0, "bf16": 2.0**-8, "f16": 2.0**-11}
SUBNORMAL = {"f32": 0.0, "f64": 0.0, "bf16": 2.0**-134, "f16": 2.0**-25}  # half the least subnormal: absolute
CHECK_SHAPES = [(4, 1001), (3, 31), (2, 4096), (5, 8)]  # misaligned rows, rows shorter than the CTA, long rows
GELU_SQRT_2_OVER_PI, GELU_CUBIC = 0.7978845608028654, 0.044715
TAIL_FIT = 2.0**-14  # bf16's exact GELU: its Phi within 2.9e-5 relatively (fit_normal_tail.py), ex2.approx's 2 ulps


@dataclass(frozen=True)
class Case:
    """One kernel: its name and consts, the inputs besides x, its float64 reference and its error bound."""

    name: str
    consts: dict[str, int]
    extra: tuple[str, ...]  # "bias", "weight": rows of N read alongside x
    eps: bool
    reference: Callable[..., np.ndarray]
    bound: Callable[..., np.ndarray]  # absolute bound before storage rounding: (x, inputs, want, u, block, dtype)
    # Holds a row in registers (the ELEMENTS const): the most elements a thread, by storage bytes an element.
    held: Callable[[int], int] | None = None

    @property
    def tiled(self) -> bool:
        return self.held is not None

    @property
    def label(self) -> str:
        return self.name + "".join(f" {k.lower()}={v}" for k, v in self.consts.items() if k != "BLOCK")


def _erf(a: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf)(a)


def gelu(x, bias, approximate: bool) -> np.ndarray:
    u = x + bias
    if approximate:
        return 0.5 * u * (1 + np.tanh(GELU_SQRT_2_OVER_PI * (u + GELU_CUBIC * u**3)))
    return 0.5 * u * (1 + _erf(u / math.sqrt(2)))


def gelu_bound(x, inputs, want, u, block, dtype, approximate: bool = False) -> np.ndarray:
    """Every intermediate is bounded by |x + bias| (erf, and erf_fast in f32 and f16, within 2 ulps, its argument
    and the products a few roundings each) and the cubic term by |u|^3: at most 10 roundings of those. The tanh form
    is u sigmoid(2 z), its sigmoid within 14 u relatively with exp_fast and recip_fast (all but f64), and |y| <= |u|:
    10 u |u| + 4 u |y| covers it. The exact form in bf16 takes Phi from a fit of log2 Phi(-t) (fit_normal_tail.py):
    within TAIL_FIT of Phi relatively, so of y; past its cutoff |y - want| <= 1.9e-8 |u|, inside 10 u |u|."""
    a = np.abs(x + inputs["bias"])
    fit = TAIL_FIT if dtype == "bf16" and not approximate else 0.0
    return 10 * u * (a + GELU_CUBIC * a**3 * (1 + a)) + (4 * u + fit) * np.abs(want)


def softmax(x) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def softmax_bound(x, inputs, want, u, block, dtype) -> np.ndarray:
    """y = exp(v - max) / sum. A row in registers sums exp(v - max); a streamed one sums each thread's exp(v - m), m
    its running maximum, rescaled as m grows, then merges the threads' (m, sum) over the CTA's tree (5 shuffle levels
    and one per doubling of warps), each merge rescaling a partial sum. Each difference errs by at most |v - max| u,
    each exponential by E (2 ulps; exp_fast, in all but f64, 4 more; an ulp is at most 2 u), each rescaling of a
    term by its shift (a term's shifts add up to at most the row's largest |v - max|), E and its product's rounding;
    the sum adds a thread's k elements and the tree's levels; the quotient and the product round once each. A row in
    registers takes 2^(v log2 e - max log2 e) by one fma and exp2 (ex2.approx in all but f64): the fma's rounding and
    log2 e's err by under 1.25 |v - max| u relatively, within the spread terms, and rounding max log2 e scales the
    whole row's exponentials alike, which the quotient cancels."""
    spread = np.where(np.isfinite(x), x.max(axis=1, keepdims=True) - x, 0)  # a masked element's want is 0
    k = math.ceil(x.shape[1] / block)
    merges = 5 + int(math.log2(max(1, block // 32)))
    e = 4 + (8 if dtype != "f64" else 0)
    return (spread + 2 * spread.max(axis=1, keepdims=True) + (k + merges + 2) * (e + 2) + 2) * u * np.abs(want)


def layer_norm(x, weight, bias) -> np.ndarray:
    mean = x.mean(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(axis=1, keepdims=True) + EPS) * weight + bias


def layer_norm_bound(x, inputs, want, u, block, dtype) -> np.ndarray:
    """Welford's mean and variance err by the depth of their merges relative to |x| + |mean| + std (stable, no
    cancellation of squares); y's terms are bounded by (|x| + |mean| + std) rstd |weight| + |bias|."""
    mean, std = x.mean(axis=1, keepdims=True), x.std(axis=1, keepdims=True)
    rstd = 1 / np.sqrt(std**2 + EPS)
    depth = math.ceil(x.shape[1] / block) + 12
    scale = (np.abs(x) + np.abs(mean) + std) * rstd * np.abs(inputs["weight"])
    return (2 * depth + 8) * u * scale + 2 * u * np.abs(inputs["bias"])


def rms_norm(x, weight) -> np.ndarray:
    return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + EPS) * weight


def rms_norm_bound(x, inputs, want, u, block, dtype) -> np.ndarray:
    """Each thread adds ceil(n / block) squares, then the CTA's tree: the mean square errs by its depth relatively,
    its reciprocal square root by half that plus 3 roundings, y by 2 more."""
    depth = math.ceil(x.shape[1] / block) + 12
    return (depth / 2 + 6) * u * np.abs(want)


def four_packs(size: int) -> int:
    return 64 // size


CASES = [
    Case("bias_gelu", {"APPROXIMATE": 0}, ("bias",), False, lambda x, b: gelu(x, b, False), gelu_bound),
    Case(
        "bias_gelu",
        {"APPROXIMATE": 1},
        ("bias",),
        False,
        lambda x, b: gelu(x, b, True),
        functools.partial(gelu_bound, approximate=True),
    ),
    # The most a thread holds (measured on the H200: docs/results/h200-2026-12-06-rows-plans/): softmax's f32 values
    # 64 of f32, 32 of 16-bit data; the norms four 16-byte packs of storage (f32 LayerNorm holding eight packs ran
    # at 0.56-0.77 of a copy from 4096 columns, four at 0.71-0.94).
    Case("softmax", {}, (), False, softmax, softmax_bound, held=lambda size: min(64, 16 * size)),
    Case("layer_norm_forward", {}, ("weight", "bias"), True, layer_norm, layer_norm_bound, held=four_packs),
    Case("rms_norm_forward", {}, ("weight",), True, rms_norm, rms_norm_bound, held=four_packs),
]
PROGRAM = rust_kernels.Program(Path(__file__).resolve().parent)


def block_for(n: int, lanes: int) -> int:
    """bias + GELU's threads a row: two 16-byte packs each, 32 to 256, and 512 from 2048 packs (measured on the
    H200 over 512-16384 columns: docs/results/h200-2026-12-06-rows-plans/)."""
    packs = -(-n // lanes)
    return 512 if packs >= 2048 else max(32, min(256, _pow2_at_least(packs / 2)))


def make_inputs(case: Case, m: int, n: int, storage: Any, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    data = {"x": (rng.standard_normal((m, n)) * 3).astype(storage)}
    if "weight" in case.extra:
        data["weight"] = rng.uniform(0.5, 1.5, n).astype(storage)
    if "bias" in case.extra:
        data["bias"] = rng.standard_normal(n).astype(storage)
    if case.name == "bias_gelu":
        data["x"].flat[::3] = np.linspace(-15, 15, len(data["x"].flat[::3]))  # both tails, past the fits' ranges
    if case.name == "softmax" and n > 1:
        data["x"][:, 1::5] = -np.inf  # masked elements (attention): exactly 0 out
    return data


def plan(case: Case, n: int, lanes: int, block: int | None = None) -> tuple[int, dict[str, int]]:
    """Threads a row and the plan's consts. A tiled kernel holds the row in registers, as many elements a thread
    as `case.held` allows (fewer threads holding more each: more loads in flight a thread and quicker CTA
    reductions), on the fewest threads that hold it; a row longer than 1024 threads hold streams. A CTA holds two
    rows of one warp each: an SM holds at most 32 CTAs, so one-warp CTAs leave half its warps idle (up to 1.2x in
    bf16, measured on the H200: docs/results/h200-2026-12-06-rows-plans/)."""
    if case.held is None:
        threads = block or block_for(n, lanes)
        return threads, {"rows": max(1, 64 // threads)}
    most = case.held(16 // lanes)
    threads = block or max(32, min(1024, _pow2_at_least(n / most)))
    elements = min(most, max(8, lanes, _pow2_at_least(n / threads)))
    return threads, {"elements": elements, "rows": 2 if threads == 32 else 1}


def dims(m: int, threads: int, consts: dict[str, int]) -> tuple[int, tuple[int, int]]:
    """The launch's grid and CTA: ROWS rows a CTA, `threads` each."""
    return -(-m // consts["rows"]), (threads, consts["rows"])


def _pow2_at_least(value: float) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1.0, value))))


def kernel_for(case: Case, dtype: str, block: int, consts: dict[str, int]) -> Any:
    return PROGRAM.kernel(case.name, dtype=dtype, block=block, **consts,
                          **{k.lower(): v for k, v in case.consts.items()})  # fmt: skip


def _plan_label(consts: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in consts.items())


def launch_args(case: Case, kernel: Any, data: dict[str, Any], y: Any) -> tuple[Any, ...]:
    m, n = data["x"].shape
    eps = (float(np.float32(EPS)) if kernel.dtype_info.acc == "f32" else EPS,) if case.eps else ()
    return (data["x"], *(data[e] for e in case.extra), y, m, n, *eps)


def check(backend: str, dtypes: list[str], block: int | None) -> int:
    failures = 0
    for case in CASES:
        for dtype in dtypes:
            for m, n in CHECK_SHAPES:
                storage = DTYPES[dtype].numpy_dtype()  # bf16: ml_dtypes' NumPy dtype
                lanes = 16 // storage.itemsize
                threads, consts = plan(case, n, lanes, block)
                kernel = kernel_for(case, dtype, threads, consts)
                code = rust_kernels.compile(kernel, target="host" if backend == "host" else "ptx")
                data = make_inputs(case, m, n, storage)
                y = np.zeros_like(data["x"])
                if backend == "cuda":
                    from rust_kernels import arrays

                    device = {k: arrays.to_device(v) for k, v in data.items()}
                    y_d = arrays.to_device(y)
                    code.get_kernel().launch(*dims(m, threads, consts), launch_args(case, kernel, device, y_d))
                    y = arrays.to_host(y_d)
                else:
                    code.get_kernel().launch(*dims(m, threads, consts), launch_args(case, kernel, data, y))
                wide = {k: v.astype(np.float64) for k, v in data.items()}
                want = case.reference(wide["x"], *(wide[e] for e in case.extra))
                s = STORAGE[dtype]
                tol = (
                    (1 + s) * case.bound(wide["x"], wide, want, UNIT[dtype], threads, dtype)
                    + s * np.abs(want)
                    + SUBNORMAL[dtype]
                    + 1e-300
                )
                err = np.abs(y.astype(np.float64) - want)
                worst = float((err / tol).max())
                ok = worst <= 1.0
                failures += not ok
                print(f"{case.label:<30} {dtype:<4} M={m:<2} N={n:<5} block={threads:<4} {_plan_label(consts):<12} "
                      f"max abs err {err.max():.2e}  err/tol {worst:.3f}  {'PASS' if ok else 'FAIL'}")  # fmt: skip
    print(f"{'all passed' if not failures else f'{failures} FAILED'} ({backend})")
    return failures


BENCH_COLUMNS = [512, 1024, 2048, 4096, 8192, 16384]
BENCH_ELEMENTS = [2**24]  # 64 MB of f32 per tensor, more than the L2 (50 MB on the H200)


def torch_reference(torch: Any, case: Case) -> Callable[..., Any]:
    f = torch.nn.functional
    return {
        "bias_gelu": lambda x, b: f.gelu(x + b, approximate="tanh" if case.consts.get("APPROXIMATE") else "none"),
        "softmax": lambda x: torch.softmax(x, dim=-1),
        "layer_norm_forward": lambda x, w, b: f.layer_norm(x, (x.shape[-1],), w, b, EPS),
        "rms_norm_forward": lambda x, w: f.rms_norm(x, (x.shape[-1],), w, EPS),
    }[case.name]


def bench(out: Path, dtypes: list[str], reps: int) -> None:
    import torch

    from rust_kernels.bench.timing import GpuTimer

    timer = GpuTimer(torch, reps)
    rows = []
    for case in CASES:
        eager = torch_reference(torch, case)
        for dtype in dtypes:
            tdtype = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16, "f64": torch.float64}[dtype]
            for elements in BENCH_ELEMENTS:
                for n in BENCH_COLUMNS:
                    m = elements // n
                    gen = torch.Generator(device="cuda").manual_seed(0)
                    x = torch.randn(m, n, device="cuda", dtype=tdtype, generator=gen) * 3
                    extra = [torch.rand(n, device="cuda", dtype=tdtype, generator=gen) + 0.5 for _ in case.extra]
                    data = {"x": x, **dict(zip(case.extra, extra, strict=True))}
                    torch._dynamo.reset()  # a fresh compile per shape: past 8 recompiles Dynamo runs eager code
                    compiled = torch.compile(eager, dynamic=False)
                    y = torch.empty_like(x)
                    threads, consts = plan(case, n, 16 // x.element_size())
                    kernel = kernel_for(case, dtype, threads, consts)
                    fn = rust_kernels.compile(kernel, target="ptx").get_kernel()
                    ours = fn.prepare(*dims(m, threads, consts), launch_args(case, kernel, data, y))
                    ours()
                    torch.testing.assert_close(y, eager(x, *extra), rtol=2e-2 if x.element_size() == 2 else 1e-4,
                                               atol=2e-2 if x.element_size() == 2 else 1e-5)  # fmt: skip
                    times = timer.medians_us({  # interleaved: the GPU speeds up and slows down as the sides run
                        "ours_us": ours,
                        "torch_us": lambda: eager(x, *extra),  # noqa: B023
                        "compile_us": lambda: compiled(x, *extra),  # noqa: B023
                        "copy_us": lambda: y.copy_(x),  # noqa: B023
                    })  # fmt: skip
                    moved = 2 * x.numel() * x.element_size()
                    row = {"kernel": case.label, "dtype": dtype, "shape": f"{m}x{n}", "bytes": moved,
                           "plan": f"block={threads} {_plan_label(consts)}".strip(),
                           **{k: round(v, 2) for k, v in times.items()},
                           "fraction_of_copy": round(times["copy_us"] / times["ours_us"], 3),
                           "vs_torch": round(times["torch_us"] / times["ours_us"], 3),
                           "vs_compile": round(times["compile_us"] / times["ours_us"], 3)}  # fmt: skip
                    rows.append(row)
                    print("  ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    for case in {r["kernel"] for r in rows}:
        for dtype in dtypes:
            sel = [r for r in rows if r["kernel"] == case and r["dtype"] == dtype]
            fractions = sorted(r["fraction_of_copy"] for r in sel)
            print(
                f"{case:<30} {dtype}: median {fractions[len(fractions) // 2]:.3f} of copy, worst vs torch "
                f"{min(r['vs_torch'] for r in sel):.3f}x, worst vs compile {min(r['vs_compile'] for r in sel):.3f}x"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=("host", "cuda"), default="host")
    parser.add_argument("--dtype", nargs="+", default=["f32", "f64", "bf16", "f16"])
    parser.add_argument("--block", type=int, help="threads per CTA for every check (default: by row length)")
    parser.add_argument("--bench", type=Path, help="on the GPU: time every kernel and write this CSV")
    parser.add_argument("--reps", type=int, default=20)
    options = parser.parse_args(argv)
    failures = check(options.backend, options.dtype, options.block)
    if options.bench:
        if options.backend != "cuda":
            parser.error("--bench needs --backend cuda")
        bench(options.bench, [d for d in options.dtype if d in ("f32", "bf16")], options.reps)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
