"""The tiled row kernels (softmax, LayerNorm, RMSNorm; examples/rows) at 512 and 1024 columns over (threads,
elements) plans, against a copy of the same bytes in one process: run.plan gives one 32-thread CTA a row at 512
columns, so an SM holds at most 32 warps (its CTA limit), and 64 at 1024.

    python rows_short.py build    # here, into RUST_KERNELS_CACHE_DIR
    python rows_short.py time     # on the GPU, from the repository root
"""

import sys

sys.path.insert(0, "examples/rows")  # run from the repository root
import run

import rust_kernels

PLANS = {512: [(32, 16), (64, 8), (128, 8)], 1024: [(64, 16), (128, 8), (32, 32)]}
LANES = {"f32": 4, "bf16": 8}


def plans(n: int, dtype: str) -> list[tuple[int, int]]:
    return [(b, e) for b, e in PLANS[n] if e >= LANES[dtype]]


def build() -> None:
    for case in (c for c in run.CASES if c.tiled):
        for dtype in LANES:
            for n in PLANS:
                for b, e in plans(n, dtype):
                    rust_kernels.build(run.kernel_for(case, dtype, b, {"elements": e}), "sm_90")


def time() -> None:
    import torch

    from rust_kernels.bench.timing import GpuTimer

    timer = GpuTimer(torch, 20)
    for case in (c for c in run.CASES if c.tiled):
        for dtype, tdtype in (("f32", torch.float32), ("bf16", torch.bfloat16)):
            for n in PLANS:
                m = 2**24 // n
                x = torch.randn(m, n, device="cuda", dtype=tdtype) * 3
                extra = [torch.rand(n, device="cuda", dtype=tdtype) + 0.5 for _ in case.extra]
                data = {"x": x, **dict(zip(case.extra, extra, strict=True))}
                y = torch.empty_like(x)
                copy = timer.median_us(lambda: y.copy_(x))  # noqa: B023
                cells = []
                for b, e in plans(n, dtype):
                    kernel = run.kernel_for(case, dtype, b, {"elements": e})
                    fn = rust_kernels.compile(kernel, target="ptx").get_kernel()
                    ours = fn.prepare(m, b, run.launch_args(case, kernel, data, y))
                    cells.append(f"{b}x{e}={copy / timer.median_us(ours):.3f}")
                print(case.name, dtype, n, " ".join(cells), flush=True)


if __name__ == "__main__":
    build() if sys.argv[1] == "build" else time()
