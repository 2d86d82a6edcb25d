"""Per-kernel GPU times (torch.profiler, L2 flushed between iterations) of ours / compile / eager / bound."""
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from rust_kernels.bench import ops as bops
from rust_kernels.bench.baselines import baseline

N = 5
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
names = sys.argv[2].split(",") if len(sys.argv) > 2 else ["ours", "compile", "torch", "bound"]
for spec in sys.argv[1].split(";"):
    fam, shape, dtype = spec.split(":")
    shape = tuple(int(v) for v in shape.split("x"))
    b = baseline(fam)
    calls = b.bench_calls(bops.device_tensors(b, shape, dtype))
    mb = b.moved_bytes(shape, dtype) / 1e6
    print(f"{fam} {shape} {dtype} {mb:.1f} MB", flush=True)
    for name in names:
        fn = calls[name]
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            for _ in range(N):
                flush.zero_()
                fn()
            torch.cuda.synchronize()
        rows = []
        for a in p.key_averages():
            t = getattr(a, "device_time_total", None) or getattr(a, "cuda_time_total", 0)
            if not t or "FillFunctor<unsigned char>" in a.key:
                continue
            rows.append((t / N, a.count / N, a.key[:60]))
        rows.sort(reverse=True)
        s = sum(r[0] for r in rows)
        print(f"  {name:8s} {s:8.1f} us  " + " | ".join(f"{k} x{c:g} {t:.1f}" for t, c, k in rows[:6]), flush=True)
