"""Every candidate plan of the training forward and backward (plain, + ReLU, + Hardswish) on MobileNetV3-Large's
BatchNorm inputs at batch 8 (f32, NCHW), each against float64 torch on the same inputs: the worst relative error
of each output per plan, and the plans whose error is over 10x the median of the case's plans. Looks for a plan
that the tuner could pick and that loses accuracy (scripts/model_grads_vs_float64.py saw ours 2-200x torch's error
on some MobileNetV3 NCHW f32 gradients in one run and not in another).

    python plans_f32.py        # on the GPU
    python plans_f32.py host   # in the emulator (NumPy arrays), the candidates for 132 SMs, the 7x7 and 14x14 shapes
    python plans_f32.py build DEST   # here: every candidate's sm_90 kernel for 132 SMs, into DEST (the GPU run's
                                     # RUST_KERNELS_CACHE_DIR, with RUST_KERNELS_TUNING=off)
"""

import statistics
import sys
from pathlib import Path

import numpy as np
import torch

from rust_kernels import builder, cache, ops
from rust_kernels.families.batch_norm import training

SHAPES = [(8, 64, 112, 112), (8, 72, 56, 56), (8, 64, 56, 56), (8, 16, 112, 112), (8, 240, 28, 28), (8, 672, 14, 14),
          (8, 120, 28, 28), (8, 480, 14, 14), (8, 24, 56, 56), (8, 72, 28, 28), (8, 960, 7, 7), (8, 240, 14, 14),
          (8, 200, 14, 14), (8, 184, 14, 14), (8, 672, 7, 7), (8, 40, 28, 28), (8, 112, 14, 14), (8, 80, 14, 14),
          (8, 160, 7, 7)]  # fmt: skip
HOST_SHAPES = [(8, 160, 7, 7), (8, 960, 7, 7), (8, 672, 7, 7), (8, 80, 14, 14), (8, 112, 14, 14), (8, 184, 14, 14)]
HOST = len(sys.argv) > 1 and sys.argv[1] == "host"
ACT = {None: lambda z: z, "relu": torch.relu, "hardswish": torch.nn.functional.hardswish}
EPS = 1e-5


def error(got, want):
    return float((got.double() - want).abs().max() / want.abs().max().clamp_min(1e-300))


def run(x, dy, w, b, act, which, plan):
    """y, then (dx, dweight, dbias) as torch tensors: `plan` for `which` direction, the rule's for the other."""
    backend, c = ("host" if HOST else "cuda"), x.shape[1]
    if HOST:
        x, dy, w, b = (t.numpy() for t in (x, dy, w, b))
        mean, var = np.zeros(c, np.float32), np.ones(c, np.float32)
    else:
        mean, var = torch.zeros(c, device="cuda"), torch.ones(c, device="cuda")
    fwd, bwd = (plan, None) if which == "forward" else (None, plan)
    if act is None:
        y, sm, si = ops.batch_norm_2d_forward(x, w, b, mean, var, True, 0.1, EPS, plan=fwd, backend=backend)
        grads = ops.batch_norm_2d_backward(dy, x, w, mean, var, sm, si, True, EPS, plan=bwd, backend=backend)
    else:
        y, sm, si = ops.batch_norm_2d_act_forward(x, w, b, mean, var, 0.1, EPS, act, plan=fwd, backend=backend)
        grads = ops.batch_norm_2d_act_backward(dy, x, w, b, sm, si, EPS, act, plan=bwd, backend=backend)
    return tuple(torch.as_tensor(np.asarray(a)) if HOST else a for a in (y, *grads))


def main() -> None:
    sms = 132 if HOST else torch.cuda.get_device_properties(0).multi_processor_count
    flagged = 0
    for shape in HOST_SHAPES if HOST else SHAPES:
        c = shape[1]
        g = torch.Generator().manual_seed(0)
        device = "cpu" if HOST else "cuda"
        x = (torch.randn(shape, generator=g, dtype=torch.float64) * 3 + 2).float().to(device)
        dy = torch.randn(shape, generator=g, dtype=torch.float64).float().to(device)
        w = (torch.rand(c, generator=g, dtype=torch.float64) + 0.5).float().to(device)
        b = torch.randn(c, generator=g).to(device)
        for act in ACT:
            leaves = [t.double().requires_grad_() for t in (x, w, b)]
            y64 = ACT[act](torch.nn.functional.batch_norm(leaves[0], None, None, leaves[1], leaves[2], True, 0.1, EPS))
            want = (y64.detach(), *torch.autograd.grad(y64, leaves, dy.double()))
            code = training.ACTIVATIONS.get(act, 0)
            rows = []
            for which in ("forward", "backward"):
                for plan in training._candidates(which, shape, "f32", "f32", 16, sms, False, code, True, True):
                    y, *grads = run(x, dy, w, b, act, which, plan)
                    got, ref = ((y,), want[:1]) if which == "forward" else (grads, want[1:])
                    rows.append((which, plan.label, [error(a, r) for a, r in zip(got, ref, strict=True)]))
            for which in ("forward", "backward"):
                mine = [r for r in rows if r[0] == which]
                for k in range(len(mine[0][2])):
                    median = statistics.median(r[2][k] for r in mine)
                    worst = max(mine, key=lambda r: r[2][k])
                    bad = [r for r in mine if r[2][k] > 10 * median + 1e-12]
                    flagged += len(bad)
                    print(f"{shape} {act} {which} out{k}: {len(mine)} plans, median {median:.2e}, worst "
                          f"{worst[2][k]:.2e} ({worst[1]})", flush=True)  # fmt: skip
                    for r in bad:
                        print(f"  OVER 10x MEDIAN: {r[2][k]:.2e} {r[1]}", flush=True)
    print(f"{flagged} (plan, output) pairs over 10x their case's median")


def build(dest: Path) -> None:
    kernels = {launch.kernel.id: launch.kernel for shape in SHAPES for act in ACT for which in ("forward", "backward")
               for plan in training._candidates(which, shape, "f32", "f32", 16, 132, False,
                                                training.ACTIVATIONS.get(act, 0), True, True)
               for launch in plan.launches}  # fmt: skip
    cache.export(builder.cached_entries([(k, "sm_90") for k in kernels.values()], builder.default_jobs()), dest)
    print(f"{len(kernels)} kernels in {dest}")


if __name__ == "__main__":
    build(Path(sys.argv[2])) if len(sys.argv) > 2 and sys.argv[1] == "build" else main()
