"""Times the example row kernels over launch plans (a one-off sweep, from the repository root): the tiled kernels
(softmax, LayerNorm, RMSNorm) over (threads, elements a thread), rows held in registers or, where BLOCK * ELEMENTS
is short of the row, streamed; bias + GELU over threads. Each beside a copy of the same bytes, one line per shape.

    python sweep.py build    # here: every plan's PTX into RUST_KERNELS_CACHE_DIR (then carried to the GPU)
    python sweep.py time     # on the GPU
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples" / "rows"))
import run

import rust_kernels
from rust_kernels.dtypes import DTYPES

SHAPES = [512, 1024, 2048, 4096, 8192, 16384]
BLOCKS = [32, 64, 128, 256, 512, 1024]


def plans(case, n: int, lanes: int) -> list[tuple[int, dict[str, int]]]:
    if not case.tiled:
        return [(b, {}) for b in BLOCKS[1:] if b * lanes <= 4 * n]
    tiled = [(b, e) for b in BLOCKS for e in (8, 16, 32) if e >= lanes and n <= b * e <= 4 * n]
    streamed = [(b, 8) for b in BLOCKS[2:] if b * 8 < n and b * lanes * 4 >= n // 4]
    return [(b, {"elements": e}) for b, e in tiled + streamed]


def cases():
    for case in run.CASES:
        for dtype in ("f32", "bf16"):
            lanes = 16 // DTYPES[dtype].numpy_dtype().itemsize
            for n in SHAPES:
                yield case, dtype, n, plans(case, n, lanes)


def build() -> None:
    kernels = list(dict.fromkeys(run.kernel_for(c, d, b, k) for c, d, _, ps in cases() for b, k in ps))
    for i, kernel in enumerate(kernels):
        rust_kernels.build(kernel, "sm_90")
        print(f"\r{i + 1}/{len(kernels)} {kernel.id}", end="", flush=True)
    print()


def time() -> None:
    import torch

    from rust_kernels.bench.timing import GpuTimer

    timer = GpuTimer(torch, 20)
    for case, dtype, n, ps in cases():
        tdtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]
        m = 2**24 // n
        x = torch.randn(m, n, device="cuda", dtype=tdtype) * 3
        extra = [torch.rand(n, device="cuda", dtype=tdtype) + 0.5 for _ in case.extra]
        data = {"x": x, **dict(zip(case.extra, extra, strict=True))}
        y = torch.empty_like(x)
        copy = timer.median_us(lambda: y.copy_(x))  # noqa: B023 (timed at once)
        cells = []
        for b, consts in ps:
            kernel = run.kernel_for(case, dtype, b, consts)
            fn = rust_kernels.compile(kernel, target="ptx").get_kernel()
            ours = fn.prepare(m, b, run.launch_args(case, kernel, data, y))
            cells.append(f"{b}x{consts.get('elements', '-')}={copy / timer.median_us(ours):.3f}")
        print(case.label, dtype, n, " ".join(cells), flush=True)


if __name__ == "__main__":
    build() if sys.argv[1] == "build" else time()
