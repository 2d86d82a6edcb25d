"""Softmax variants (a one-off experiment, from the repository root; the variant specs are in variants/): the
row in registers with (two) two block reductions, max then sum of exp(v - max), or (local) each thread's
exponentials relative to its own maximum, computed before the CTA's maximum is known, then the sum of the rescaled
partial sums; with the accurate exp in f32 or exp_fast (EXP_FAST=1). Each beside a copy of the same bytes.

    python variants.py build    # here, into RUST_KERNELS_CACHE_DIR
    python variants.py time     # on the GPU
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "examples" / "rows"))
import run  # noqa: E402

import rust_kernels  # noqa: E402

PROGRAM = rust_kernels.Program(HERE / "variants")
SHAPES = [512, 1024, 2048, 4096, 8192, 16384]
SOFTMAX = next(c for c in run.CASES if c.name == "softmax")


def kernels():
    for dtype in ("f32", "bf16"):
        lanes = 4 if dtype == "f32" else 8
        for n in SHAPES:
            threads, consts = run.plan(SOFTMAX, n, lanes)
            out = []
            for name in ("softmax_two", "softmax_local"):
                for fast in (0, 1) if dtype == "f32" else (0,):
                    k = PROGRAM.kernel(name, dtype=dtype, block=threads, exp_fast=fast, **consts)
                    out.append((f"{name[8:]}{'+fast' if fast else ''}", k))
            yield dtype, n, threads, out


def build() -> None:
    for dtype, n, _, ks in kernels():
        for _, k in ks:
            rust_kernels.build(k, "sm_90")
        print(dtype, n, flush=True)


def time() -> None:
    import torch

    from rust_kernels.bench.timing import GpuTimer

    timer = GpuTimer(torch, 20)
    for dtype, n, threads, ks in kernels():
        tdtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]
        m = 2**24 // n
        x = torch.randn(m, n, device="cuda", dtype=tdtype) * 3
        y = torch.empty_like(x)
        copy = timer.median_us(lambda: y.copy_(x))  # noqa: B023 (timed at once)
        eager = timer.median_us(lambda: torch.softmax(x, dim=-1))  # noqa: B023
        cells = [f"eager={copy / eager:.3f}"]
        for label, k in ks:
            fn = rust_kernels.compile(k, target="ptx").get_kernel()
            ours = fn.prepare(m, threads, (x, y, m, n))
            ours()
            torch.testing.assert_close(y, torch.softmax(x, dim=-1), rtol=2e-2, atol=1e-5)
            cells.append(f"{label}={copy / timer.median_us(ours):.3f}")
        print("softmax", dtype, n, " ".join(cells), flush=True)


if __name__ == "__main__":
    build() if sys.argv[1] == "build" else time()
