"""Times the channels_last reduction kernels of variants/<label>/ (build_variants.py) on the GPU, each also with
its registers capped (PTX .maxnreg: more CTAs resident), at every split the autotuner would time, against torch's
own channels_last kernels (batch_norm_stats, batch_norm_backward_reduce) and the read bound; GPU time (CUDA
events, L2 flushed, median of 15). Run from the repository root with the package importable:

    python docs/results/h200-2026-12-04-cl-pipeline/probe.py > probe.log
"""

import functools
import json
import statistics
import sys
import tempfile
from pathlib import Path

import torch

from rust_kernels.cache import Entry
from rust_kernels.cuda import CudaKernel
from rust_kernels.families.batch_norm import training

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_variants import CAPS, INSTANCES, instance

HERE = Path(__file__).resolve().parent
SHAPES = [
    (128, 64, 112, 112),
    (128, 256, 56, 56),
    (128, 64, 56, 56),
    (128, 512, 28, 28),
    (128, 128, 28, 28),
    (128, 1024, 14, 14),
    (128, 256, 14, 14),
    (128, 2048, 7, 7),
    (32, 96, 56, 56),
    (32, 384, 14, 14),
]
SMS = torch.cuda.get_device_properties(0).multi_processor_count
FLUSH = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
TMP = Path(tempfile.mkdtemp())
KERNELS = {k.id: k for k in (instance(*spec) for spec in INSTANCES)}


def timed(fn, reps: int = 15) -> float:
    times = []
    for _ in range(reps + 2):
        FLUSH.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    return statistics.median(times[2:])


@functools.cache
def loaded(label: str, kernel_id: str, cap: int | None) -> CudaKernel:
    """The variant's cubin (built as the package builds one), registers capped at `cap`."""
    where = HERE / "variants" / label / kernel_id / f"cap-{cap or 'none'}"
    return CudaKernel(KERNELS[kernel_id], 0, entry=Entry(where, json.loads((where / "meta.json").read_text())))


def args_for(name: str, shape, tensors, split: int, cols: int) -> list:
    b, c, h, w = shape
    t = tensors
    if name == "batch_norm_2d_batch_stats":
        return [
            t["x"],
            t["rm"],
            t["rv"],
            t["mean"],
            t["invstd"],
            t["ws"],
            t["ctr"],
            b,
            c,
            h * w,
            1e-5,
            0.1,
            split,
            cols,
        ]
    extra = [t["weight"], t["bias"]] if name.endswith("_act") else []
    return [
        t["dy"],
        t["x"],
        t["mean"],
        t["invstd"],
        *extra,
        t["dw"],
        t["db"],
        t["sums"],
        t["ws"],
        t["ctr"],
        b,
        c,
        h * w,
        split,
        float(b * h * w),
        cols,
    ]


def checked(
    name: str, k: CudaKernel, grid_x: int, shape, live: dict, pointers: dict, split: int, cols: int, expected
) -> float:
    """The largest relative error of one launch's per-channel results against torch's (0 where not compared: the
    activation's backward)."""
    if expected is None:
        return 0.0
    outputs = ("mean", "invstd") if name == "batch_norm_2d_batch_stats" else ("dw", "db")
    for o in outputs:
        live[o].fill_(float("nan"))
    k.prepare((grid_x, split, 1), (256, 1, 1), args_for(name, shape, pointers, split, cols))()
    got = [live[o] for o in outputs]
    return max(float(((g - e).abs() / e.abs().clamp_min(1e-3)).max()) for g, e in zip(got, expected, strict=True))


def main() -> None:
    print(
        f"{SMS} SMs; times in us (best split @); bound: a same-bytes copy (x.clone()) times the bytes read over the"
        " bytes it moves"
    )
    labels = sorted(p.name for p in (HERE / "variants").iterdir())
    for shape in SHAPES:
        c = shape[1]
        for spec in INSTANCES:
            name, dtype, _, vectorized, _ = spec
            if shape[1] % training.lanes(vectorized, dtype):
                continue
            tdt = {"bf16": torch.bfloat16, "f32": torch.float32}[dtype]
            x = (torch.randn(shape, device="cuda") * 2 + 3).to(tdt).contiguous(memory_format=torch.channels_last)
            dy = torch.randn(shape, device="cuda").to(tdt).contiguous(memory_format=torch.channels_last)
            f = lambda n: torch.zeros(n, device="cuda")  # noqa: E731
            mean, invstd = x.float().mean((0, 2, 3)), torch.rand(c, device="cuda") + 0.5
            kernel = instance(*spec)
            width = 3 if name == "batch_norm_2d_batch_stats" else 2
            splits = training.splits_around(shape, dtype, vectorized, True, SMS)
            grid_x, _, cols = training.geometry(shape, dtype, vectorized, True, SMS)
            tensors = {
                "x": x.data_ptr(),
                "dy": dy.data_ptr(),
                "rm": f(c),
                "rv": f(c) + 1,
                "mean": mean,
                "invstd": invstd,
                "weight": f(c) + 1,
                "bias": f(c),
                "dw": f(c),
                "db": f(c),
                "sums": f(2 * c),
                "ws": f(c * max(splits) * width),
                "ctr": torch.zeros(c, dtype=torch.int32, device="cuda"),
            }
            live = tensors  # the arrays behind the raw pointers below
            tensors = {k: (v.data_ptr() if isinstance(v, torch.Tensor) else v) for k, v in live.items()}
            nbytes = x.numel() * x.element_size() * (1 if width == 3 else 2)
            if width == 3:
                anchor_out = torch.batch_norm_stats(x, 1e-5)
                anchor = timed(lambda x=x: torch.batch_norm_stats(x, 1e-5))
            else:
                args = (dy, x, mean, invstd, torch.ones(c, device="cuda"), True, True, True)
                anchor_out = None if name.endswith("_act") else torch.batch_norm_backward_reduce(*args)[2:]
                anchor = timed(lambda args=args: torch.batch_norm_backward_reduce(*args))
            row = [f"{name[14:]:<24} {shape!s:<20} {dtype:<4} v{vectorized} torch {anchor:7.1f}"]
            best, worst = None, 0.0
            for label in labels:
                for cap in CAPS:
                    k = loaded(label, kernel.id, cap)
                    results = []
                    for split in splits:
                        launch = k.prepare((grid_x, split, 1), (256, 1, 1), args_for(name, shape, tensors, split, cols))
                        results.append((timed(launch), split))
                    t, split = min(results)
                    error = checked(name, k, grid_x, shape, live, tensors, split, cols, anchor_out)
                    worst = max(worst, error)
                    row.append(f"{label[:4]}/{cap or '-'} {t:7.1f}@{split}")
                    best = min(best or (t, ""), (t, f"{label}/{cap}"))
            copy = timed(lambda x=x: x.clone())  # reads and writes x's bytes
            bound = copy * nbytes / (2 * x.numel() * x.element_size())
            row.append(f"max rel err {worst:.1e}")
            row.append(f"best {best[1]} {bound / best[0]:.2f} of the bound, {anchor / best[0]:.2f}x torch")
            print(" | ".join(row), flush=True)


if __name__ == "__main__":
    main()
