"""One channels_last training BatchNorm2d step on the GPU (rust_kernels.torch.BatchNorm2d, the rule's plans: run it
with RUST_KERNELS_TUNING=off), each stage synchronised and printed, against torch.nn.BatchNorm2d; every thread's
stack printed (faulthandler's watchdog) and the process ended after $2 seconds.

    python probe_cl.py BxCxHxW DTYPE SECONDS     # DTYPE: f32 or bf16 (bf16 activations, f32 parameters)
"""

import faulthandler
import sys
import time

faulthandler.dump_traceback_later(float(sys.argv[3]), exit=True)

import torch  # noqa: E402

from rust_kernels.torch import BatchNorm2d  # noqa: E402

shape = tuple(int(v) for v in sys.argv[1].split("x"))
dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[sys.argv[2]]
torch.manual_seed(0)
x = torch.randn(shape, device="cuda").to(dtype).contiguous(memory_format=torch.channels_last)
dy = torch.randn_like(x)
ours, ref = BatchNorm2d(shape[1]).cuda(), torch.nn.BatchNorm2d(shape[1]).cuda()


def step(module: torch.nn.Module, tag: str) -> tuple[torch.Tensor, torch.Tensor]:
    xi = x.detach().requires_grad_()
    t = time.perf_counter()
    y = module(xi)
    torch.cuda.synchronize()
    print(f"{tag} forward {1e3 * (time.perf_counter() - t):.1f} ms", flush=True)
    y.backward(dy)
    torch.cuda.synchronize()
    print(f"{tag} backward {1e3 * (time.perf_counter() - t):.1f} ms", flush=True)
    return y.float(), xi.grad.float()


y, dx = step(ours, "ours")
with torch.autocast("cuda", torch.bfloat16, enabled=dtype == torch.bfloat16):
    y_ref, dx_ref = step(ref, "torch")
print(
    f"{sys.argv[1]} {sys.argv[2]}: max |y - torch| {(y - y_ref).abs().max().item():.3g}, "
    f"max |dx - torch| {(dx - dx_ref).abs().max().item():.3g}, "
    f"running_mean {(ours.running_mean - ref.running_mean).abs().max().item():.3g}",
    flush=True,
)
