"""Eval-mode BatchNorm2d over channels_last at model shapes: ours (rk_torch.batch_norm_2d, tuned plans) and torch's,
each against float64: y, dx, dweight, dbias relative errors (max |err| / max |ref|)."""
import torch

import rust_kernels.torch as rkt

torch.manual_seed(0)
shapes = [(64, 64, 112, 112), (64, 64, 56, 56), (64, 256, 56, 56), (64, 128, 28, 28), (64, 512, 28, 28),
          (64, 1024, 14, 14), (64, 2048, 7, 7), (128, 32, 112, 112), (128, 96, 56, 56), (128, 1280, 7, 7)]


def run(fn, x64, dy64, params, dtype, pdtype):
    x = x64.detach().clone().to(dtype).contiguous(memory_format=torch.channels_last).requires_grad_()
    w, b, m, v = (p.detach().clone().to(pdtype) for p in params)
    w.requires_grad_(), b.requires_grad_()
    y = fn(x, m, v, w, b, False, 0.1, 1e-5)
    y.backward(dy64.to(dtype).contiguous(memory_format=torch.channels_last))
    return [t.detach().double() for t in (y, x.grad, w.grad, b.grad)], y


for shape in shapes:
    c = shape[1]
    x64 = (torch.randn(shape, device="cuda", dtype=torch.float64) * 2 + 0.5)
    dy64 = torch.randn(shape, device="cuda", dtype=torch.float64)
    params = (torch.rand(c, device="cuda", dtype=torch.float64) + 0.5,
              torch.randn(c, device="cuda", dtype=torch.float64),
              torch.randn(c, device="cuda", dtype=torch.float64) * 0.5,
              torch.rand(c, device="cuda", dtype=torch.float64) + 0.5)
    want, _ = run(torch.nn.functional.batch_norm, x64, dy64, params, torch.float64, torch.float64)
    for dtype in (torch.float32, torch.bfloat16):
        theirs, _ = run(torch.nn.functional.batch_norm, x64, dy64, params, dtype, torch.float32)
        ours, y = run(rkt.batch_norm_2d, x64, dy64, params, dtype, torch.float32)

        def err(a, w):
            return float((a - w).abs().max() / w.abs().max())

        line = " ".join(
            f"{n} {err(o, w):.1e}/{err(t, w):.1e}"
            for n, o, t, w in zip(("y", "dx", "dw", "db"), ours, theirs, want, strict=True)
        )
        layout = "cl" if y.is_contiguous(memory_format=torch.channels_last) else "NOT CL"
        print(shape, str(dtype)[6:], "ours/torch:", line, layout, flush=True)
