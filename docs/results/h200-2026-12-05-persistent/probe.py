"""Where a channels_last statistics launch's time goes: probe/cl_stats_probe is batch_norm_2d_batch_stats (this
commit's templates) with a const STOP that returns after each thread's walk of its rows (1), after the CTA's merge
down its columns (2), after the slices' publication and arrival count (3), at once (4: the launch alone), or never
(0). Each form is timed (GPU time, L2 flushed, median) on the rule's geometry (training.geometry: grid x, split,
cols), on mid-sized shapes where the launch takes 9-14 us whatever the bytes, and on large ones.

    python probe.py build    # here, into RUST_KERNELS_CACHE_DIR
    python probe.py time     # on the GPU
"""

import sys
from pathlib import Path

import rust_kernels
from rust_kernels.families.batch_norm import training

HERE = Path(__file__).resolve().parent
PROBE = rust_kernels.Program(HERE / "probe")
SHAPES = [(1, 32, 35, 35), (32, 112, 14, 14), (1, 256, 56, 56), (32, 256, 28, 28), (128, 320, 8, 8),
          (128, 256, 14, 14), (128, 512, 28, 28)]  # fmt: skip
DTYPES = ("bf16", "f32")
SMS = 132


def kernels(dtype: str) -> list:
    return [PROBE.kernel("cl_stats_probe", dtype=dtype, block=256, vectorized=1, channels_last=1, stop=s)
            for s in range(5)]  # fmt: skip


def build() -> None:
    for dtype in DTYPES:
        for k in kernels(dtype):
            rust_kernels.build(k, "sm_90")
            print(k.id, flush=True)


def time() -> None:
    import torch

    from rust_kernels.bench.timing import GpuTimer

    timer = GpuTimer(torch, 40)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for dtype in DTYPES:
        fns = [rust_kernels.compile(k, target="ptx").get_kernel() for k in kernels(dtype)]
        for shape in SHAPES:
            b, c, h, w = shape
            grid_x, split, cols = training.geometry(shape, dtype, 1, True, sms)
            tdt = {"bf16": torch.bfloat16, "f32": torch.float32}[dtype]
            x = (torch.randn(shape, device="cuda") * 2 + 1).to(tdt).contiguous(memory_format=torch.channels_last)
            f32 = dict(device="cuda", dtype=torch.float32)
            rm, rv = torch.zeros(c, **f32), torch.ones(c, **f32)
            sm, si = torch.empty(c, **f32), torch.empty(c, **f32)
            ws, counters = torch.empty(split * c * 3, **f32), torch.zeros(grid_x, device="cuda", dtype=torch.int32)
            cells = []
            for s, fn in enumerate(fns):
                args = [x, rm, rv, sm, si, ws, counters, b, c, h * w, 1e-5, 0.1, split, cols]
                call = fn.prepare((grid_x, split, 1), 256, args)
                call()
                if s == 0:
                    mean = x.float().mean(dim=(0, 2, 3))
                    torch.testing.assert_close(sm, mean, rtol=1e-4, atol=1e-4)
                cells.append(f"{timer.median_us(call):7.2f}")
            mb = x.numel() * x.element_size() / 1e6
            print(f"{dtype} {'x'.join(map(str, shape)):<16} {mb:7.2f} MB grid {grid_x}x{split} cols {cols}: "
                  f"empty {cells[4]} | walk {cells[1]} | +merge down columns {cells[2]} | +publish, count "
                  f"{cells[3]} | whole {cells[0]} us", flush=True)  # fmt: skip


if __name__ == "__main__":
    build() if sys.argv[1] == "build" else time()
