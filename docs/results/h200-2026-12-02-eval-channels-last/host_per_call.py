"""Host µs per call (unsynchronised, back to back, median of interleaved rounds) of the eval ops and of a
BatchNorm2d module's forward + backward, ours (converted) against torch's, NCHW and channels_last."""
import statistics
import time

import torch

import rust_kernels.torch as rkt
from rust_kernels import ops

shape, n = (8, 32, 8, 8), 2000
x = torch.randn(shape, device="cuda")
xc = x.contiguous(memory_format=torch.channels_last)
dy, dyc = torch.randn_like(x), torch.randn_like(xc)
w, b, m, v = (torch.rand(32, device="cuda") + 0.5 for _ in range(4))
calls = {
    "nchw op fwd (NCHW)": lambda: ops.batch_norm_2d_nchw_forward_inference(x, w, b, m, v),
    "native op fwd eval (NCHW)": lambda: ops.batch_norm_2d_forward(x, w, b, m, v, False, 0.0, 1e-5),
    "native op fwd eval (CL)": lambda: ops.batch_norm_2d_forward(xc, w, b, m, v, False, 0.0, 1e-5),
    "torch F.batch_norm eval (CL)": lambda: torch.nn.functional.batch_norm(xc, m, v, w, b, False, 0.0, 1e-5),
    "nchw op bwd (NCHW)": lambda: ops.batch_norm_2d_nchw_backward(dy, x, w, m, v),
    "native op bwd eval (CL)": lambda: ops.batch_norm_2d_backward(dyc, xc, w, m, v, None, None, False, 1e-5),
}
ours_bn = rkt.convert(torch.nn.BatchNorm2d(32).cuda()).eval()
theirs_bn = torch.nn.BatchNorm2d(32).cuda().eval()
for name, layout in (("NCHW", x), ("CL", xc)):
    leaf = layout.clone().requires_grad_()
    g = dy if name == "NCHW" else dyc
    calls[f"ours module fwd+bwd ({name})"] = lambda leaf=leaf, g=g: torch.autograd.backward(ours_bn(leaf), g)
    calls[f"torch module fwd+bwd ({name})"] = lambda leaf=leaf, g=g: torch.autograd.backward(theirs_bn(leaf), g)
for f in calls.values():
    for _ in range(50):
        f()
torch.cuda.synchronize()
rounds = {k: [] for k in calls}
for _ in range(7):
    for k, f in calls.items():
        t = time.perf_counter()
        for _ in range(n):
            f()
        rounds[k].append((time.perf_counter() - t) / n * 1e6)
        torch.cuda.synchronize()
for k, r in rounds.items():
    print(f"{k:<34} {statistics.median(r):7.2f} µs (min {min(r):.2f})")
