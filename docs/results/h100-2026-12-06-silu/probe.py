"""SiLU fused into BatchNorm2d over 16-bit activations, with the fast sigmoid (activation.rs.j2) against the accurate
one: each side's rule plans (RUST_KERNELS_TUNING=off) over EfficientNet-B0's BatchNorm inputs at batch 32 and 128,
NCHW and channels_last, bf16 with f32 parameters (autocast's pairing), as a user runs them: BatchNorm2d + SiLU
through `convert(fuse=True)`, torch's unconverted module the anchor in the same process.

    python probe.py build DEST    # here: the sm_90 kernels of the rule plans of this side's templates, into DEST
                                  # (also those of `bench --models efficientnet_b0 --batch 32 128 --bn train
                                  # --dtype bf16 --fuse` with RUST_KERNELS_TUNING=off)
    python probe.py grads DEST    # here: likewise for scripts/model_grads_vs_float64.py efficientnet_b0 train LAYOUT
                                  # fuse (batch 8, f32 and bf16)
    python probe.py time TAG      # on the GPU (RUST_KERNELS_CACHE_DIR=DEST, RUST_KERNELS_TUNING=off): a CSV line a
                                  # case: training forward + backward, and the eval forward, ours and torch's (µs);
                                  # then the training y and dx errors of each against float64 (max |error| over
                                  # max |value|)
"""

import itertools
import sys
from pathlib import Path

import ml_dtypes
import numpy as np

from rust_kernels import builder, cache, ops
from rust_kernels.bench import suite
from rust_kernels.runtime import Placement

MODELS = ("efficientnet_b0@32", "efficientnet_b0@128")
CALLS = {  # the ops the fused module calls, and the plain training ops of the model step: (its [B, C, H, W] inputs,
    # scalars)
    "batch_norm_2d_forward": ("x", {"training": True}),
    "batch_norm_2d_backward": ("dy x", {"training": True}),
    "batch_norm_2d_act_forward": ("x", {"activation": "silu"}),
    "batch_norm_2d_act_backward": ("dy x", {"activation": "silu"}),
    "batch_norm_2d_act_eval_forward": ("x", {"activation": "silu"}),
    "batch_norm_2d_act_eval_backward": ("dy x", {"activation": "silu"}),
}


def shapes() -> list[tuple[int, ...]]:
    return [s for s, where in suite.sources("batch_norm_2d").items() if set(where) & set(MODELS)]


def build(dest: Path, batch: int | None = None, dtypes=(ml_dtypes.bfloat16,)) -> None:
    """The rule plans' kernels on shapes() (at `batch` instead, where given) in both layouts and `dtypes`."""
    kernels = {}
    for (b, c, h, w), dtype, channels_last in itertools.product(shapes(), dtypes, (False, True)):
        b = batch or b
        full = np.zeros((b, h, w, c), dtype)
        full = full.transpose(0, 3, 1, 2) if channels_last else full.reshape(b, c, h, w)
        for name, (big, scalars) in CALLS.items():
            op = getattr(ops, name).op
            named = [full if i.name in big.split() else np.ones(c, np.float32) for i in op.inputs]
            values = tuple(scalars.get(s.name, s.default) for s in op.scalars)
            _, problem = op.problem(tuple(named), values, "host")
            rule = op.candidates(problem, Placement(16, 132))[0]
            kernels.update((launch.kernel.id, launch.kernel) for launch in rule.launches)
    cache.export(builder.cached_entries([(k, "sm_90") for k in kernels.values()], builder.default_jobs()), dest)
    print(f"{len(kernels)} kernels in {dest}")


def time(tag: str) -> None:
    import torch

    import rust_kernels.torch as rk_torch
    from rust_kernels.bench.timing import GpuTimer

    timer = GpuTimer(torch, reps=30)
    print("tag,shape,layout,ours_train_us,torch_train_us,ours_eval_us,torch_eval_us,ours_y_err,ours_dx_err,"
          "torch_y_err,torch_dx_err", flush=True)  # fmt: skip
    for b, c, h, w in shapes():
        for layout in (torch.contiguous_format, torch.channels_last):
            theirs = torch.nn.Sequential(torch.nn.BatchNorm2d(c), torch.nn.SiLU()).cuda()
            ours = rk_torch.convert(torch.nn.Sequential(torch.nn.BatchNorm2d(c), torch.nn.SiLU()).cuda(), fuse=True)
            x = torch.randn(b, c, h, w, device="cuda").to(torch.bfloat16).to(memory_format=layout)
            x.requires_grad_(True)
            dy = torch.randn_like(x)
            ours.train(), theirs.train()
            times = timer.medians_us({"ours_train": lambda m=ours, x=x, dy=dy: m(x).backward(dy),
                                      "torch_train": lambda m=theirs, x=x, dy=dy: m(x).backward(dy)})  # fmt: skip
            ours.eval(), theirs.eval()
            with torch.no_grad():
                calls = {"ours_eval": lambda m=ours, x=x: m(x), "torch_eval": lambda m=theirs, x=x: m(x)}
                times |= timer.medians_us(calls)
            exact = _gradients(torch, theirs.double(), x.double(), dy.double())
            errors = [_error(got, want) for m in (ours, theirs) for got, want in
                      zip(_gradients(torch, m.float(), x, dy), exact, strict=True)]  # fmt: skip
            name = "channels_last" if layout is torch.channels_last else "nchw"
            row = [tag, f"{b}x{c}x{h}x{w}", name, *(f"{times[k]:.2f}" for k in
                   ("ours_train", "torch_train", "ours_eval", "torch_eval"))]  # fmt: skip
            row += [f"{e:.2e}" for e in errors]
            print(",".join(row), flush=True)


def _gradients(torch, module, x, dy):
    """y and dx of one training forward + backward of `module` (its parameters in f32 or f64) on x."""
    module.train()
    x = x.detach().clone().requires_grad_(True)
    y = module(x)
    y.backward(dy)
    return y.detach().double(), x.grad.double()


def _error(got, want) -> float:
    return ((got - want).abs().max() / want.abs().max()).item()


if __name__ == "__main__":
    mode, arg = sys.argv[1:]
    grads = {"grads": lambda a: build(Path(a), 8, (np.float32, ml_dtypes.bfloat16))}
    {"build": lambda a: build(Path(a)), "time": time, **grads}[mode](arg)
