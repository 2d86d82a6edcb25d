"""A compiled ResNet-50 training step (B=128, bf16 autocast, BN training, SGD) with torch's BN and with ours
(convert(fuse=True)), one process, the sides interleaved: ROUNDS rounds of STEPS steps each side, CUDA events around
each round, host ms to issue a round's steps. Usage: python compiled_step.py {cl,nchw} [torch.compile mode] [profile]
(profile: then GPU time per step by kernel group, from torch.profiler over 5 more steps a side)"""
import collections
import copy
import re
import statistics
import sys
import time

import torch
import torchvision

import rust_kernels.torch as rk

ROUNDS, STEPS = 8, 10
fmt_name = sys.argv[1]
mode = sys.argv[2] if len(sys.argv) > 2 else "default"
fmt = torch.channels_last if fmt_name == "cl" else torch.contiguous_format
torch.manual_seed(0)
base = torchvision.models.resnet50().cuda().to(memory_format=fmt).train()
x = torch.randn(128, 3, 224, 224, device="cuda").contiguous(memory_format=fmt)
y = torch.randint(0, 1000, (128,), device="cuda")


def make(model):
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    cmodel = torch.compile(model, mode=None if mode == "default" else mode)

    def step():
        if mode == "reduce-overhead":
            torch.compiler.cudagraph_mark_step_begin()
        with torch.autocast("cuda", torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(cmodel(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    t = time.perf_counter()
    for _ in range(8):
        step()
    torch.cuda.synchronize()
    print(f"  warm-up (compile) {time.perf_counter() - t:.1f} s", flush=True)
    return step


sides = {"torch": make(copy.deepcopy(base)), "ours": make(rk.convert(copy.deepcopy(base), fuse=True))}
ms = {s: [] for s in sides}
host = {s: [] for s in sides}
for _ in range(ROUNDS):
    for side, step in sides.items():
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t = time.perf_counter()
        start.record()
        for _ in range(STEPS):
            step()
        end.record()
        host[side].append((time.perf_counter() - t) / STEPS * 1e3)
        end.synchronize()
        ms[side].append(start.elapsed_time(end) / STEPS)
t_ms, o_ms = statistics.median(ms["torch"]), statistics.median(ms["ours"])
print(f"resnet50 B=128 bf16 {fmt_name} compile mode={mode}: torch {t_ms:.2f} ms, ours {o_ms:.2f} ms, "
      f"{t_ms / o_ms:.2f}x (median of {ROUNDS} interleaved rounds of {STEPS} steps); host ms to issue a step: torch "
      f"{statistics.median(host['torch']):.2f}, ours {statistics.median(host['ours']):.2f}")
pairs = zip(ms["torch"], ms["ours"], strict=True)
print("  per round torch/ours ms: " + ", ".join(f"{a:.1f}/{b:.1f}" for a, b in pairs))

GROUPS = (("ours (rust_kernels)", r"_entry_point$"), ("inductor (triton)", r"^triton"),
          ("conv / gemm", r"conv|gemm|xmma|cutlass|cudnn|sm90|nchwToNhwc|nhwcToNchw"), ("other", r""))
if sys.argv[3:] == ["profile"]:
    for side, step in sides.items():
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                step()
            torch.cuda.synchronize()
        kernels = collections.Counter()
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                kernels[e.name] += e.time_range.elapsed_us() / 5 / 1e3
        groups = collections.Counter()
        for name, ms_step in kernels.items():
            groups[next(g for g, pattern in GROUPS if re.search(pattern, name))] += ms_step
        print(f"{side}: GPU ms per step by group: " + ", ".join(f"{g} {v:.2f}" for g, v in groups.most_common()))
        for name, ms_step in kernels.most_common(12):
            print(f"    {ms_step:6.3f} ms  {name[:110]}")
