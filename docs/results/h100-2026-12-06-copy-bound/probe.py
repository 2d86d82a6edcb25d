"""Why a same-bytes copy (the row kernels' bound, `y.copy_(x)`) takes 24 µs in some of run.py --bench's cases and
27 µs in others (bf16, 2^24 elements, H100), while the row kernels take about 27.5 µs in all: on the GPU, from the
repository root, with the row kernels' cache (rkc.tgz) carried.

1. `order`: run.py's benchmark sequence for a few cases (x, weight/bias, y allocated as it does, ours, eager,
   torch.compile, copy), then the copy and ours again: each time with x's and y's offsets in their 2 MiB pages.
2. `place`: x and y as views of one buffer at chosen distances apart, the copy and LayerNorm (run.plan's plan) timed
   on each placement.
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples" / "rows"))
import run

import rust_kernels
from rust_kernels.bench.timing import GpuTimer

TIMER = GpuTimer(torch, 30)
MIB = 2**20


def ours_call(case, x, extra, y):
    m, n = x.shape
    threads, consts = run.plan(case, n, 16 // x.element_size())
    kernel = run.kernel_for(case, "bf16", threads, consts)
    fn = rust_kernels.compile(kernel, target="ptx").get_kernel()
    data = {"x": x, **dict(zip(case.extra, extra, strict=True))}
    return fn.prepare(*run.dims(m, threads, consts), run.launch_args(case, kernel, data, y))


def where(t) -> str:
    return f"{t.data_ptr() % (2 * MIB) // 1024}K"


def order() -> None:
    for name in ("bias_gelu", "softmax", "layer_norm_forward"):
        case = next(c for c in run.CASES if c.name == name)
        eager = run.torch_reference(torch, case)
        for n in (1024, 2048, 8192):
            m = 2**24 // n
            gen = torch.Generator(device="cuda").manual_seed(0)
            x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16, generator=gen) * 3
            extra = [torch.rand(n, device="cuda", dtype=x.dtype, generator=gen) + 0.5 for _ in case.extra]
            torch._dynamo.reset()
            compiled = torch.compile(eager, dynamic=False)
            y = torch.empty_like(x)
            ours = ours_call(case, x, extra, y)
            t = {"copy0": TIMER.median_us(lambda: y.copy_(x))}  # noqa: B023
            t["ours"] = TIMER.median_us(ours)
            t["torch"] = TIMER.median_us(lambda: eager(x, *extra))  # noqa: B023
            t["compile"] = TIMER.median_us(lambda: compiled(x, *extra))  # noqa: B023
            t["copy"] = TIMER.median_us(lambda: y.copy_(x))  # noqa: B023
            t["ours2"] = TIMER.median_us(ours)
            cells = " ".join(f"{k}={v:.2f}" for k, v in t.items())
            apart = (y.data_ptr() - x.data_ptr()) / MIB
            print(f"order {case.label} {m}x{n} x@{where(x)} y@{where(y)} y-x={apart:.3f}MiB {cells}", flush=True)


def place() -> None:
    case = next(c for c in run.CASES if c.name == "layer_norm_forward")
    numel = 2**24
    buf = torch.empty(3 * numel + 4 * MIB, device="cuda", dtype=torch.bfloat16)
    w, b = (torch.rand(4096, device="cuda", dtype=torch.bfloat16) + 0.5 for _ in range(2))
    for x_off in (0, 256):
        for gap in (0, 256, 4096, 64 * 1024, MIB, 2 * MIB, 3 * MIB + 256):
            x = buf[x_off : x_off + numel].view(4096, 4096)
            x.normal_()
            start = x_off + numel + gap // 2
            y = buf[start : start + numel].view(4096, 4096)
            ours = ours_call(case, x, [w, b], y)
            copy = TIMER.median_us(lambda: y.copy_(x))  # noqa: B023
            mine = TIMER.median_us(ours)
            copy2 = TIMER.median_us(lambda: y.copy_(x))  # noqa: B023
            print(
                f"place x@{where(x)} y@{where(y)} gap={gap}B copy={copy:.2f} ours={mine:.2f} copy2={copy2:.2f}",
                flush=True,
            )


if __name__ == "__main__":
    {"order": order, "place": place}[sys.argv[1]]()
