"""Times the example row kernels (examples/rows) over launch plans, each beside a copy of the same bytes in one
process (a one-off sweep, from the repository root): the tiled kernels over (threads, elements a thread, rows a
CTA), bias + GELU over (threads, rows a CTA), and bf16's exact GELU as it was (erf_fast: before/) against the fit
of the normal tail that replaces it. 2^24 elements a tensor, f32 and bf16.

    python sweep.py build    # here: every plan's PTX into RUST_KERNELS_CACHE_DIR (then carried to the GPU)
    python sweep.py time     # on the GPU
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "examples" / "rows"))
import run  # noqa: E402

import rust_kernels  # noqa: E402
from rust_kernels.builder import cached_entries, default_jobs  # noqa: E402
from rust_kernels.dtypes import DTYPES  # noqa: E402

COLUMNS = [512, 1024, 2048, 4096, 8192, 16384]
BEFORE = rust_kernels.Program(HERE / "before")


def plans(case, n: int, lanes: int) -> list[tuple[int, dict[str, int]]]:
    out = []
    for t in (32, 64, 128, 256, 512, 1024):
        if case.tiled:
            for e in (8, 16, 32, 64):
                if e >= lanes and n <= t * e <= 2 * n and (e > 8 or t == 64):
                    out += [(t, {"elements": e, "rows": r}) for r in ((1, 2, 4) if t == 32 else (1,))]
        elif t * lanes <= n and t <= 512:
            out += [(t, {"rows": r}) for r in (1, 2, 4) if t * r <= 512 and (r == 1 or n <= 2048)]
    return out


def cases():
    for case in run.CASES:
        for dtype in ("f32", "bf16"):
            lanes = 16 // DTYPES[dtype].numpy_dtype().itemsize
            for n in COLUMNS:
                yield case, dtype, n, plans(case, n, lanes)


def before_kernel(dtype: str, n: int):
    """HEAD 346d3a9's bias + GELU (exact: erf_fast in bf16 too) with its plan's threads (four packs each, 64-512)."""
    return BEFORE.kernel("bias_gelu", dtype=dtype, block=max(64, min(512, run._pow2_at_least(n / 32))), approximate=0)


def build() -> None:
    kernels = [run.kernel_for(c, d, b, k) for c, d, _, ps in cases() for b, k in ps]
    kernels += [before_kernel("bf16", n) for n in COLUMNS]
    work = [(k, "sm_90") for k in dict.fromkeys(kernels)]
    done = 0

    def advance(kernel, arch) -> None:
        nonlocal done
        done += 1
        print(f"\r{done}/{len(work)} {kernel.id:<60}", end="", flush=True)

    cached_entries(work, default_jobs(), advance)
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
            ours = fn.prepare(*run.dims(m, b, consts), run.launch_args(case, kernel, data, y))
            label = "x".join(str(v) for v in (b, consts.get("elements", "-"), consts["rows"]))
            cells.append(f"{label}={copy / timer.median_us(ours):.3f}")
        if case.name == "bias_gelu" and dtype == "bf16" and not case.consts["APPROXIMATE"]:
            kernel = before_kernel(dtype, n)
            fn = rust_kernels.compile(kernel, target="ptx").get_kernel()
            ours = fn.prepare(m, kernel.block_dim[0], run.launch_args(case, kernel, data, y))
            cells.append(f"before:{kernel.block_dim[0]}={copy / timer.median_us(ours):.3f}")
        print(case.label, dtype, n, f"copy={copy:.2f}us", " ".join(cells), flush=True)


if __name__ == "__main__":
    build() if sys.argv[1] == "build" else time()
