"""The channels_last training forward + backward of one shape (DTYPE bf16-f32 or f32) on the fastest cooperative
plan of each direction that this GPU's tuning cache timed (go2.sh's `tune` ran first), forced (plan=), inside
cudaProfilerStart/Stop after warm-up: run under `ncu --profile-from-start off` for the kernels' source-level stall
sampling (go2.sh).

    python ncu_coop.py BxCxHxW DTYPE
"""

import json
import sys

import torch

from rust_kernels import ops, tuning
from rust_kernels.families.batch_norm import training

shape = tuple(int(v) for v in sys.argv[1].split("x"))
dtype_key = sys.argv[2]
dtype, param = (dtype_key.split("-") + [dtype_key])[:2]
torch.cuda.init()  # tuning.gpu asks the driver, which torch initialises
info = tuning.gpu(torch.cuda.current_device())
key = json.dumps([list(shape), dtype_key, [0, 2, 3, 1], 16, info.name, info.sms])
best = {}
for which in ("forward", "backward"):
    timed = []
    for plan in training._candidates(which, shape, dtype, param, 16, info.sms, True, 0, True, True):
        entry = tuning.lookup(info, tuning.entry_name(key, plan, info.arch), fresh=False)
        if "_cooperative_" in plan.label and entry is not None and entry.us is not None:
            timed.append((entry.us, plan.label, plan))
    us, label, best[which] = min(timed, key=lambda t: t[:2])
    print(f"{which}: {label} {us:.2f} µs (tuned)")
torch_dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]
x = torch.randn(shape, device="cuda").to(torch_dtype).contiguous(memory_format=torch.channels_last)
dy = torch.randn(shape, device="cuda").to(torch_dtype).contiguous(memory_format=torch.channels_last)
weight, bias = torch.rand(shape[1], device="cuda") + 0.5, torch.randn(shape[1], device="cuda")
mean, var = torch.zeros(shape[1], device="cuda"), torch.ones(shape[1], device="cuda")


def pair() -> None:
    _, save_mean, save_invstd = ops.batch_norm_2d_forward(x, weight, bias, mean, var, True, 0.1, 1e-5,
                                                          plan=best["forward"])  # fmt: skip
    ops.batch_norm_2d_backward(dy, x, weight, mean, var, save_mean, save_invstd, True, 1e-5, True,
                               plan=best["backward"])  # fmt: skip


for _ in range(3):
    pair()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
pair()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
