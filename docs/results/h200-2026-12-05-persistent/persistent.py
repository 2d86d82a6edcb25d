"""The persistent channels_last kernels on the GPU (not run yet; run.sh): for each shape and dtype, every
persistent plan the autotuner would list (RUST_KERNELS_PERSISTENT=1's candidates) checked against float64
(check.check_one, forward and backward; a plan whose grid the GPU cannot hold at once is refused, and reported so,
as the autotuner drops it), then a forward + backward pair timed (GPU time, L2 flushed, median) with each resident
persistent pair, with the rule's plans (the two-launch ones, or the one-launch column kernels), and with PyTorch
eager, in one process. With --sanitize (under compute-sanitizer) it runs each persistent pair of the first
three shapes once, nothing else.

    python persistent.py [--sanitize]     # on the GPU, the wheel installed
"""

import sys

import torch

from rust_kernels import ArgumentError, check, ops, registry
from rust_kernels.bench.timing import GpuTimer
from rust_kernels.families.batch_norm import common, training

EPS = 1e-5
SHAPES = [(1, 32, 35, 35), (32, 112, 14, 14), (1, 256, 56, 56), (32, 184, 14, 14), (128, 320, 8, 8),
          (32, 256, 14, 14), (32, 512, 7, 7), (8, 64, 56, 56), (16, 128, 28, 28), (32, 2048, 7, 7)]  # fmt: skip
DTYPES = {"bf16-f32": torch.bfloat16, "f32": torch.float32}


def persistent_pairs(shape: tuple[int, ...], key: str, sms: int) -> list[tuple[object, object]]:
    storage, param = common.split_key(key)
    vectorized = training.vector_mode(shape, storage, 16, True)
    options = training.persistent_options(shape, storage, vectorized, sms, training.PERSISTENT_CTAS_PER_SM * sms)
    return [tuple(training.persistent(w, shape, storage, param, vectorized, u, c) for w in ("forward", "backward"))
            for u, c in options]  # fmt: skip


def pair_inputs(shape: tuple[int, ...], dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    x = (torch.randn(shape, device="cuda") * 2 + 1).to(dtype).contiguous(memory_format=torch.channels_last)
    c = shape[1]
    w, b = torch.rand(c, device="cuda") + 0.5, torch.randn(c, device="cuda")
    return x, torch.randn_like(x), w, b, torch.zeros(c, device="cuda"), torch.ones(c, device="cuda")


def run_pair(inputs: tuple[torch.Tensor, ...], forward: object = None, backward: object = None) -> None:
    x, dy, w, b, rm, rv = inputs
    _, sm, si = ops.batch_norm_2d_forward(x, w, b, rm, rv, True, 0.1, EPS, plan=forward)
    ops.batch_norm_2d_backward(dy, x, w, rm, rv, sm, si, True, EPS, plan=backward)


def sanitize(sms: int) -> None:
    for shape in SHAPES[:3]:
        for key, dtype in DTYPES.items():
            for pair in persistent_pairs(shape, key, sms):
                try:
                    run_pair(pair_inputs(shape, dtype), *pair)
                except ArgumentError as err:  # a grid the GPU cannot hold at once
                    print(f"refused: {err}", flush=True)
    torch.cuda.synchronize()


def main() -> None:
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    if "--sanitize" in sys.argv:
        sanitize(sms)
        return
    forward, backward = registry.family("batch_norm_2d_forward"), registry.family("batch_norm_2d_backward")
    timer = GpuTimer(torch, 30)
    failures = 0
    for shape in SHAPES:
        for key, dtype in DTYPES.items():
            pairs = []
            for pair in persistent_pairs(shape, key, sms):
                results = [check.check_one(f, p, shape, "cuda") for f, p in zip((forward, backward), pair, strict=True)]
                refused = [r for r in results if "is cooperative" in r.error]
                for plan, r in zip(pair, results, strict=True):
                    if refused:
                        print(f"refused (not resident) {plan.kernel.id} grid {plan.grid}: {r.error}", flush=True)
                    elif not r.passed:
                        failures += 1
                        print(f"FAILED {plan.kernel.id} grid {plan.grid} {shape}: {r}", flush=True)
                if not refused:
                    pairs.append(pair)
            inputs = pair_inputs(shape, dtype)
            x, dy, w, b, rm, rv = inputs

            def eager(x=x, dy=dy, w=w, b=b, rm=rm, rv=rv):
                xs = x.detach().requires_grad_()
                torch.nn.functional.batch_norm(xs, rm, rv, w, b, True, 0.1, EPS).backward(dy)

            rule = timer.median_us(lambda inputs=inputs: run_pair(inputs))
            cells = [f"{timer.median_us(lambda p=p, inputs=inputs: run_pair(inputs, *p)):7.1f} "
                     f"({p[0].kernel.units}x{p[0].values[1][1]}, "
                     f"grid {p[0].grid[0]}x{p[0].grid[1]})" for p in pairs]  # fmt: skip
            mb = x.numel() * x.element_size() / 1e6
            print(f"{key:8} {'x'.join(map(str, shape)):<16} {mb:7.2f} MB  rule {rule:7.1f}  eager "
                  f"{timer.median_us(eager):7.1f}  persistent (units x cols): {'  '.join(cells) or 'none fits'}",
                  flush=True)  # fmt: skip
    print(f"{failures} persistent plan checks failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
