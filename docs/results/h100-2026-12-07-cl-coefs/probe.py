"""The channels_last eval forward with each thread's coefficients loaded in packs
(batch_norm_2d_frozen_forward_channels_last with packed_coefficients.patch applied: per array two 16-byte loads for
a bf16 thread's 8 lanes, where one scalar load per lane and array took 32) against the kernel without it (before/:
the templates of a51f33d, as frozen_cl_before), at every grid the autotuner times, interleaved with PyTorch eager,
torch.compile of the same maths and a same-bytes copy (GPU time, L2 flushed, median of 15). Both kernels' y are
checked bit for bit.

    git apply docs/results/h100-2026-12-07-cl-coefs/packed_coefficients.patch    # first, from the repository root
    python probe.py build DEST    # here: the before kernels and every instance of the changed ones (CHANGED), exported
                                  # to cache directory DEST (go.sh carries it)
    python probe.py time          # on the GPU
"""

import os
import sys
from pathlib import Path

import rust_kernels
from rust_kernels import builder, cache, ops
from rust_kernels import kernels as catalogue
from rust_kernels.bench.baselines.batch_norm import ForwardInference
from rust_kernels.bench.ops import device_tensors, reset_compiled
from rust_kernels.families.batch_norm import common, frozen
from rust_kernels.runtime import Placement

HERE = Path(__file__).resolve().parent
BEFORE = rust_kernels.Program(HERE / "before")
# Where torch.compile beat the kernel on the H200 (docs/results/h200-2026-12-02-eval-channels-last/: 7x7 and 14x14
# maps of many channels, mid-sized tensors) and the bench shapes.
SHAPES = [(32, 2048, 7, 7), (128, 2048, 7, 7), (8, 1280, 7, 7), (1, 1024, 7, 7), (32, 1024, 14, 14),
          (128, 576, 14, 14), (32, 256, 56, 56), (64, 512, 28, 28), (128, 96, 56, 56), (32, 64, 112, 112),
          (8, 32, 8, 8), (128, 160, 7, 7)]  # fmt: skip
DTYPES = ("bf16-f32", "f32")
PLACEMENT = Placement(16, 132)
# The kernels whose channels_last instances now load their coefficients in packs.
CHANGED = ("batch_norm_2d_frozen_forward_channels_last", "batch_norm_2d_frozen_forward_act",
           "batch_norm_2d_frozen_forward_add_relu")  # fmt: skip
FN = ops.batch_norm_2d_forward


def before(vectorized, dtype):
    """frozen_cl_before with the plan's pack mode, in dtype key `dtype`."""
    activations, param = common.split_key(dtype)
    return BEFORE.kernel("frozen_cl_before", 256, vectorized, 1, dtype=activations, param_dtype=param)


def build(destination: str) -> None:
    kernels = [(before(vectorized, dtype), "sm_90") for dtype in DTYPES for vectorized in (0, 1, 2)]
    kernels += [(k, "sm_90") for k in catalogue.instances() if k.name in CHANGED]
    cache.export(builder.cached_entries(kernels, builder.default_jobs()), Path(destination))


def time() -> None:
    import torch

    from rust_kernels.bench.timing import GpuTimer

    timer = GpuTimer(torch, 15)
    print(torch.cuda.get_device_name(), flush=True)
    family = ForwardInference(channels_last=True)
    rows = ["dtype,shape,plan,us"]
    for dtype in DTYPES:
        for shape in SHAPES:
            reset_compiled(torch)
            tensors = device_tensors(family, shape, dtype)
            calls = family.bench_calls(tensors)
            x = tensors["x"].contiguous(memory_format=torch.channels_last)
            params = [tensors[n] for n in ("weight", "bias", "running_mean", "running_var")]
            _, problem = FN.op.problem((x, *params), (False, 0.0, 1e-5), "cuda")
            plans = [p for p in FN.op.candidates(problem, PLACEMENT) if isinstance(p.kernel, frozen.FORWARD_KERNELS)]
            b, c, h, w = shape
            timed, outs = {}, {}
            for p in plans:
                ctas = p.value("CTAS")
                for name, k in (("new", p.kernel), ("old", before(p.kernel.vectorized, dtype))):
                    y = torch.empty_like(x)
                    fn = rust_kernels.compile(k).get_kernel()
                    nhwc = [t.permute(0, 2, 3, 1) for t in (x, y)]  # the raw launch takes the contiguous NHWC buffers
                    call = fn.prepare(p.grid, p.kernel.block_dim, [*nhwc, *params, b, c, h * w, 1e-5, ctas])
                    call()
                    outs[name, ctas, p.kernel.vectorized] = y
                    timed[f"{name}:v{p.kernel.vectorized}:ctas{ctas}"] = call
            same = all(torch.equal(outs[("new", *key[1:])], outs[key]) for key in outs if key[0] == "old")
            timed.update({k: calls[k] for k in ("torch", "compile", "bound")})
            us = timer.medians_us(timed)
            where = "x".join(map(str, shape))
            rows += [f'{dtype},{where},"{k}",{v:.3f}' for k, v in us.items()]
            rule = f"v{plans[0].kernel.vectorized}:ctas{plans[0].value('CTAS')}"
            best = {n: min(v for k, v in us.items() if k.startswith(n + ":")) for n in ("new", "old")}
            print(f"{dtype} {where}: rule new {us['new:' + rule]:.2f} old {us['old:' + rule]:.2f} "
                  f"({us['old:' + rule] / us['new:' + rule]:.2f}x) | best new {best['new']:.2f} old {best['old']:.2f} "
                  f"({best['old'] / best['new']:.2f}x) | torch {us['torch']:.2f} | compile {us['compile']:.2f} | "
                  f"bound {us['bound']:.2f} ({us['bound'] / best['new']:.2f} of it; old "
                  f"{us['bound'] / best['old']:.2f}) | new = old bitwise: {same}", flush=True)  # fmt: skip
            Path(os.environ.get("OUT", "."), "plans.csv").write_text("\n".join(rows) + "\n")


if __name__ == "__main__":
    build(sys.argv[2]) if sys.argv[1] == "build" else time()
