"""Per-kernel GPU time of one training-mode BN forward + backward (the bench's `Training` case), ours vs PyTorch
eager vs torch.compile, on the suite's weakest classes (bench_suite.csv): torch.profiler's kernel records, L2 flushed
by a memset (not a kernel) before each of ITERS calls. Run on the GPU with the wheel installed."""

import sys
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

from rust_kernels import driver, tuning
from rust_kernels.bench import baselines, parse_shape
from rust_kernels.bench.ops import device_tensors, reset_compiled

ITERS = 10
CASES = [line.split() for line in sys.argv[1:]] if len(sys.argv) > 1 else []
drv = driver.driver_module()
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")


def flushed(call):
    stream = torch.cuda.current_stream().cuda_stream
    drv.cuMemsetD8Async(flush.data_ptr(), 0, flush.numel(), stream)
    call()


def kernels(call):
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(ITERS):
            flushed(call)
        torch.cuda.synchronize()
    per = defaultdict(lambda: [0, 0.0])
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and "memset" not in e.name.lower():
            per[e.name][0] += 1
            per[e.name][1] += e.device_time
    return {name: (n / ITERS, us / ITERS) for name, (n, us) in per.items()}


for family_name, shape_text, dtype in CASES:
    family = baselines.baseline(family_name)
    shape = parse_shape(shape_text)
    reset_compiled(torch)
    calls = family.bench_calls(device_tensors(family, shape, dtype))
    print(f"== {family_name} {shape_text} {dtype}")
    for name in ("ours", "torch", "compile"):
        got = kernels(calls[name])
        total = sum(us for _, us in got.values())
        print(f"  {name:8s} total {total:8.1f} us, {sum(n for n, _ in got.values()):.0f} kernels")
        for kname, (n, us) in sorted(got.items(), key=lambda kv: -kv[1][1]):
            print(f"      {us:8.1f} us  x{n:.0f}  {kname[:110]}")
print(f"tuner timed {len(tuning.timed)} keys here")
