"""Times the tiled row kernels over (block, elements) plans for long rows (a one-off plan sweep)."""
import sys

sys.path.insert(0, "examples/rows")  # run from the repository root
import run

import rust_kernels

CONFIGS = [(b, e) for b in (64, 128, 256, 512, 1024) for e in (8, 16, 32, 64)]
SHAPES = [2048, 4096, 8192, 16384]


def plans(n, lanes):
    return [(b, e) for b, e in CONFIGS if b * e >= n and b * e <= 4 * n and e >= max(8, lanes)]


def build():
    from rust_kernels.dtypes import DTYPES
    for case in (c for c in run.CASES if c.tiled):
        for dtype in ("f32", "bf16"):
            lanes = 16 // DTYPES[dtype].numpy_dtype().itemsize
            for n in SHAPES:
                for b, e in plans(n, lanes):
                    rust_kernels.compile(run.kernel_for(case, dtype, b, {"elements": e}), target="ptx")


def time():
    import torch

    from rust_kernels.bench.timing import GpuTimer
    timer = GpuTimer(torch, 20)
    for case in (c for c in run.CASES if c.tiled):
        for dtype in ("f32", "bf16"):
            tdtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]
            for n in SHAPES:
                m = 2**24 // n
                x = torch.randn(m, n, device="cuda", dtype=tdtype) * 3
                extra = [torch.rand(n, device="cuda", dtype=tdtype) + 0.5 for _ in case.extra]
                data = {"x": x, **dict(zip(case.extra, extra, strict=True))}
                y = torch.empty_like(x)
                copy = timer.median_us(lambda: y.copy_(x))  # noqa: B023 (timed at once)
                cells = []
                for b, e in plans(n, 16 // x.element_size()):
                    kernel = run.kernel_for(case, dtype, b, {"elements": e})
                    fn = rust_kernels.compile(kernel, target="ptx").get_kernel()
                    ours = fn.prepare(m, b, run.launch_args(case, kernel, data, y))
                    cells.append(f"{b}x{e}={copy / timer.median_us(ours):.3f}")
                print(case.name, dtype, n, " ".join(cells), flush=True)


if __name__ == "__main__":
    build() if sys.argv[1] == "build" else time()
