"""One training BatchNorm2d forward + backward per shape, channels_last, for ncu: torch's BatchNorm2d or ours (run
with RUST_KERNELS_TUNING=off: the rule's plans), three warm-up steps each, then the profiled steps between
cudaProfilerStart/Stop, each shape's kernels after a marker (a fill of SHAPE_INDEX + 1 floats: ncu_rows.py splits
the kernel rows there).

    ncu --profile-from-start off ... python ncu_step.py ours|torch
"""

import sys

import torch

from rust_kernels.torch import BatchNorm2d

SHAPES = (((1, 256, 56, 56), "f32"), ((32, 320, 8, 8), "f32"), ((128, 320, 8, 8), "bf16"), ((32, 112, 14, 14), "bf16"))


def step(x: torch.Tensor, dy: torch.Tensor, module: torch.nn.Module, amp: bool) -> None:
    with torch.autocast("cuda", torch.bfloat16, enabled=amp):
        y = module(x)
    y.backward(dy)


def main() -> None:
    ours = sys.argv[1] == "ours"
    cases = []
    for shape, dtype in SHAPES:
        x = torch.randn(shape, device="cuda").to(getattr(torch, {"f32": "float32", "bf16": "bfloat16"}[dtype]))
        x = x.contiguous(memory_format=torch.channels_last).requires_grad_()
        module = (BatchNorm2d if ours else torch.nn.BatchNorm2d)(shape[1]).cuda()
        cases.append((x, torch.randn_like(x), module, dtype == "bf16"))
    for case in cases:
        for _ in range(3):
            step(*case)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for i, case in enumerate(cases):
        torch.full((i + 1,), 1.0, device="cuda")
        step(*case)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    main()
