"""Two forms of a row kernel in one process (from the repository root; run on the H200 on 12-05: device/ab.log),
each beside a copy of the same bytes, 2^24 elements per shape, 512-16384 columns:
- softmax with one fma and ex2.approx an element ("after") against exp_fast of v - max ("before"), and bias + GELU
  (erf form) with erf_fast against the accurate erf. The "before" specs (before/) are HEAD 3689dd9's templates under
  other names; both sides build with this commit's cuda_std.
- RMSNorm and LayerNorm holding the row as row::Tile does ("tile": f32 values, any start and length) against
  packed/'s rms_norm_packed and layer_norm_packed ("packed": the row's 16-byte packs of storage, whole aligned packs
  only), an experiment on the registers a long bf16 row takes.

    python ab.py build    # here, into RUST_KERNELS_CACHE_DIR
    python ab.py time     # on the GPU
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "examples" / "rows"))
import run  # noqa: E402

import rust_kernels  # noqa: E402

BEFORE, PACKED = rust_kernels.Program(HERE / "before"), rust_kernels.Program(HERE / "packed")
NORMS = ("rms_norm_forward", "layer_norm_forward")
CASES = [c for c in run.CASES if c.name in ("softmax", *NORMS) or c.consts == {"APPROXIMATE": 0}]


def pairs():
    """(case, dtype, columns, threads, ((label, kernel), (label, kernel))) over the bench's shapes."""
    for case in CASES:
        for dtype in ("f32", "bf16"):
            for n in run.BENCH_COLUMNS:
                threads, consts = run.plan(case, n, 4 if dtype == "f32" else 8)
                ours = run.kernel_for(case, dtype, threads, consts)
                if case.name in NORMS:
                    other = PACKED.kernel(
                        case.name.replace("_forward", "_packed"), dtype=dtype, block=threads, **consts
                    )
                    yield case, dtype, n, threads, (("tile", ours), ("packed", other))
                else:
                    extra = {k.lower(): v for k, v in case.consts.items()}
                    other = BEFORE.kernel(f"{case.name}_before", dtype=dtype, block=threads, **consts, **extra)
                    yield case, dtype, n, threads, (("before", other), ("after", ours))


def build() -> None:
    for case, dtype, n, _, forms in pairs():
        for _, k in forms:
            rust_kernels.build(k, "sm_90")
        print(case.label, dtype, n, flush=True)


def time() -> None:
    import torch

    from rust_kernels.bench.timing import GpuTimer

    timer = GpuTimer(torch, 20)
    for case, dtype, n, threads, forms in pairs():
        m = 2**24 // n
        gen = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(m, n, device="cuda", dtype={"f32": torch.float32, "bf16": torch.bfloat16}[dtype], generator=gen)
        data = {"x": x * 3, **{e: torch.rand(n, device="cuda", dtype=x.dtype, generator=gen) + 0.5 for e in case.extra}}
        want = run.torch_reference(torch, case)(data["x"], *(data[e] for e in case.extra))
        y = torch.empty_like(x)
        copy = timer.median_us(lambda: y.copy_(data["x"]))  # noqa: B023 (timed at once)
        cells = []
        for label, k in forms:
            fn = rust_kernels.compile(k, target="ptx").get_kernel()
            ours = fn.prepare(m, threads, run.launch_args(case, k, data, y))
            ours()
            tight = x.element_size() == 4
            torch.testing.assert_close(y, want, rtol=1e-4 if tight else 2e-2, atol=1e-5 if tight else 2e-2)
            us = timer.median_us(ours)
            cells.append(f"{label} {us:8.2f} ({copy / us:.3f})")
        print(f"{case.label:<24} {dtype:<4} {m}x{n:<6} copy {copy:8.2f} us  " + "  ".join(cells), flush=True)


if __name__ == "__main__":
    build() if sys.argv[1] == "build" else time()
