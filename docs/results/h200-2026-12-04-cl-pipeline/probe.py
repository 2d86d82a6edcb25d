"""Times the training BatchNorm kernels of variants/<label>/ (build_variants.py) on the GPU, each as built and with
its registers capped (PTX .maxnreg), at every split (reductions) or grid (elementwise launches) the autotuner would
time, against torch's own kernels (batch_norm_stats, batch_norm_backward_reduce, batch_norm_elemt,
batch_norm_backward_elemt) and a same-bytes copy; GPU time (CUDA events, L2 flushed, median of 15). The reductions'
per-channel results are checked against torch's. Run from the repository root with the package importable:

    python docs/results/h200-2026-12-04-cl-pipeline/probe.py > probe.log              # channels_last
    python docs/results/h200-2026-12-04-cl-pipeline/probe.py nchw > probe_nchw.log    # the NCHW instances
"""

import functools
import json
import statistics
import sys
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
KERNELS = {k.id: k for k in (instance(*spec) for spec in INSTANCES)}
EPS = 1e-5


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


def args_for(name: str, shape, p: dict, split: int, cols: int) -> list:
    """The launch's arguments in the spec's order (p: raw pointers by role); `split` is CTAS for the elementwise."""
    b, c, h, w = shape
    if name == "batch_norm_2d_batch_stats":
        return [p["x"], p["rm"], p["rv"], p["mean"], p["invstd"], p["ws"], p["ctr"], b, c, h * w, EPS, 0.1, split, cols]
    if name == "batch_norm_2d_normalize":
        return [p["x"], p["y"], p["weight"], p["bias"], p["mean"], p["invstd"], b, c, h * w, split]
    if name == "batch_norm_2d_backward_elementwise":
        return [p["dy"], p["x"], p["y"], p["weight"], p["mean"], p["invstd"], p["sums"], b, c, h * w, split]
    extra = [p["weight"], p["bias"]] if name.endswith("_act") else []
    counts = float(b * h * w)
    return [p["dy"], p["x"], p["mean"], p["invstd"], *extra, p["dw"], p["db"], p["sums"], p["ws"], p["ctr"], b, c,
            h * w, split, counts, cols]  # fmt: skip


def checked(launch, live: dict, outputs: tuple[str, ...], expected) -> float:
    """The largest relative error of one launch's per-channel results against torch's (0 where not compared)."""
    if expected is None:
        return 0.0
    for o in outputs:
        live[o].fill_(float("nan"))
    launch()
    got = [live[o] for o in outputs]
    return max(float(((g - e).abs() / e.abs().clamp_min(1e-3)).max()) for g, e in zip(got, expected, strict=True))


def anchor_of(name: str, x, dy, live: dict):
    """torch's kernel doing the same work, its per-channel results to compare (or None) and their names here."""
    c = x.shape[1]
    if name == "batch_norm_2d_batch_stats":
        return (lambda: torch.batch_norm_stats(x, EPS)), torch.batch_norm_stats(x, EPS), ("mean", "invstd")
    mean, invstd, weight = live["mean"], live["invstd"], live["weight"]
    if name == "batch_norm_2d_normalize":
        return (lambda: torch.batch_norm_elemt(x, weight, live["bias"], mean, invstd, EPS)), None, ()
    if name == "batch_norm_2d_backward_elementwise":
        sum_dy, sum_dy_xmu = torch.randn(c, device="cuda"), torch.randn(c, device="cuda")
        count = torch.full((1,), x.numel() // c, dtype=torch.int32, device="cuda")
        return (
            (lambda: torch.batch_norm_backward_elemt(dy, x, mean, invstd, weight, sum_dy, sum_dy_xmu, count)),
            None,
            (),
        )
    args = (dy, x, mean, invstd, weight, True, True, True)
    expected = None if name.endswith("_act") else torch.batch_norm_backward_reduce(*args)[2:]
    return (lambda: torch.batch_norm_backward_reduce(*args)), expected, ("dw", "db")


def main(channels_last: int) -> None:
    print(
        f"{SMS} SMs; times in us (best split or grid @); bound: a same-bytes copy (x.clone()) scaled to the bytes moved"
    )
    labels = sorted(p.name for p in (HERE / "variants").iterdir())
    for shape in SHAPES:
        c = shape[1]
        for spec in (s for s in INSTANCES if s[4] == channels_last):
            name, dtype, _, vectorized, _, _ = spec
            run = shape[1] if channels_last else shape[2] * shape[3]  # the contiguous run the packs divide
            if run % training.lanes(vectorized, dtype):
                continue
            tdt = {"bf16": torch.bfloat16, "f32": torch.float32}[dtype]
            layout = torch.channels_last if channels_last else torch.contiguous_format
            x = (torch.randn(shape, device="cuda") * 2 + 3).to(tdt).contiguous(memory_format=layout)
            dy = torch.randn(shape, device="cuda").to(tdt).contiguous(memory_format=layout)
            kernel = instance(*spec)
            elementwise = name in ("batch_norm_2d_normalize", "batch_norm_2d_backward_elementwise")
            layout_flag = bool(channels_last)
            if elementwise:
                sizes = training.grids_around(shape, dtype, vectorized, layout_flag, SMS)
                grid_x, cols = 0, 0
            else:
                sizes = training.splits_around(shape, dtype, vectorized, layout_flag, SMS)
                grid_x, _, cols = training.geometry(shape, dtype, vectorized, layout_flag, SMS)
            zeros = lambda n: torch.zeros(n, device="cuda")  # noqa: E731
            live = {
                "y": torch.empty_like(x),
                "rm": zeros(c),
                "rv": zeros(c) + 1,
                "mean": x.float().mean((0, 2, 3)),
                "invstd": torch.rand(c, device="cuda") + 0.5,
                "weight": zeros(c) + 1,
                "bias": zeros(c),
                "dw": zeros(c),
                "db": zeros(c),
                "sums": torch.rand(2 * c, device="cuda"),
                "ws": zeros(c * max(sizes) * 3),
                "ctr": torch.zeros(c, dtype=torch.int32, device="cuda"),
            }
            pointers = {"x": x.data_ptr(), "dy": dy.data_ptr()} | {k: v.data_ptr() for k, v in live.items()}
            moved = {
                "batch_norm_2d_batch_stats": 1,
                "batch_norm_2d_normalize": 2,
                "batch_norm_2d_backward_elementwise": 3,
            }
            nbytes = x.numel() * x.element_size() * moved.get(name, 2)
            torch_fn, expected, outputs = anchor_of(name, x, dy, live)
            anchor = timed(torch_fn)
            row = [f"{name[14:]:<24} {shape!s:<20} {dtype:<4} v{vectorized} torch {anchor:7.1f}"]
            best, worst = None, 0.0
            for label in (la for la in labels if (HERE / "variants" / la / kernel.id).is_dir()):
                for cap in CAPS:
                    k = loaded(label, kernel.id, cap)
                    results = []
                    for size in sizes:
                        grid = (size, 1, 1) if elementwise else (grid_x, size, 1)
                        launch = k.prepare(grid, (256, 1, 1), args_for(name, shape, pointers, size, cols))
                        results.append((timed(launch), size, launch))
                    t, size, launch = min(results, key=lambda r: r[:2])
                    worst = max(worst, checked(launch, live, outputs, expected))
                    row.append(f"{label[:4]}/{cap or '-'} {t:7.1f}@{size}")
                    best = min(best or (t, ""), (t, f"{label}/{cap}"))
            copy = timed(lambda x=x: x.clone())  # reads and writes x's bytes
            bound = copy * nbytes / (2 * x.numel() * x.element_size())
            row.append(f"max rel err {worst:.1e}")
            row.append(f"best {best[1]} {bound / best[0]:.2f} of the bound, {anchor / best[0]:.2f}x torch")
            print(" | ".join(row), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1:] != ["nchw"]))
