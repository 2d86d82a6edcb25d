"""Where an eager training step with our BN spends its extra host time (12-06's `bench --models`: ResNet-50 B = 32
issued a step in 35.5 ms against torch's 28.2, about 140 µs more per BN layer, where one BN + ReLU layer alone costs
about as much host time as torch's).

Per model and dtype (B = 32, BN training, `convert(fuse=True)`, SGD, as `bench --models`): host ms to issue one step
(the GPU drained before each, so the host never waits on it), torch's model and ours, median of 15; the same with
Python's cyclic GC off; how many op calls per step took the checked path (each about 1 ms) and how many the fast
path; then cProfile over 3 of ours' steps (tottime). Then one layer alone: BN + ReLU, forward + backward, host µs.

    RUST_KERNELS_CACHE_DIR=... PYTHONPATH=python python probe.py
"""

import copy
import cProfile
import gc
import io
import pstats
import statistics
import sys
import time
from collections import Counter

import torch
import torchvision

import rust_kernels.torch as rk
from rust_kernels import runtime

COUNTS: Counter = Counter()
_call, _fast = runtime.Op.call, runtime.Op.fast


def counted_call(self, *a, **k):
    COUNTS["checked " + self.name] += 1
    return _call(self, *a, **k)


def counted_fast(self, *a, **k):
    out = _fast(self, *a, **k)
    COUNTS[("fast " if out is not None else "miss ") + self.name] += 1
    return out


runtime.Op.call, runtime.Op.fast = counted_call, counted_fast


def side(model, dtype):
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    x = torch.randn(32, 3, 224, 224, device="cuda")
    y = torch.randint(0, 1000, (32,), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=dtype == "bf16", cache_enabled=False):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    return step


def host_ms(step, n=15, gc_off=False):
    times = []
    for _ in range(n):
        torch.cuda.synchronize()
        if gc_off:
            gc.disable()
        t = time.perf_counter()
        step()
        times.append((time.perf_counter() - t) * 1e3)
        gc.enable()
    torch.cuda.synchronize()
    return statistics.median(times)


def main():
    layer()
    for name in sys.argv[1:] or ["resnet50", "mobilenet_v2"]:
        for dtype in ("bf16", "f32"):
            torch.manual_seed(0)
            base = getattr(torchvision.models, name)().cuda().train()
            steps = {"torch": side(base, dtype), "ours": side(rk.convert(copy.deepcopy(base), fuse=True), dtype)}
            for s in steps.values():
                for _ in range(5):
                    s()
            COUNTS.clear()
            steps["ours"]()
            torch.cuda.synchronize()
            calls = dict(sorted(COUNTS.items()))
            row = {}
            for gc_off in (False, True):
                for label, s in steps.items():
                    row[(label, gc_off)] = host_ms(s, gc_off=gc_off)
            print(
                f"{name} B=32 {dtype}: host ms a step torch {row['torch', False]:.2f} ours {row['ours', False]:.2f}"
                f" | GC off: torch {row['torch', True]:.2f} ours {row['ours', True]:.2f}",
                flush=True,
            )
            print(
                f"  op calls in one step: {sum(v for k, v in calls.items() if k.startswith('fast'))} fast, "
                f"{sum(v for k, v in calls.items() if k.startswith('checked'))} checked: {calls}",
                flush=True,
            )
            if dtype == "bf16":
                profile = cProfile.Profile()
                profile.enable()
                for _ in range(3):
                    steps["ours"]()
                profile.disable()
                torch.cuda.synchronize()
                out = io.StringIO()
                pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(35)
                print(out.getvalue(), flush=True)


def layer():
    """One BN + ReLU layer, training, forward + backward of y.sum(): host µs per iteration (no sync inside)."""
    for shape in ((8, 32, 8, 8), (32, 256, 56, 56)):
        for dtype in (torch.float32, torch.bfloat16):
            x = torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True)
            mods = {
                "torch": torch.nn.Sequential(torch.nn.BatchNorm2d(shape[1]), torch.nn.ReLU()).cuda().train(),
                "ours": rk.convert(
                    torch.nn.Sequential(torch.nn.BatchNorm2d(shape[1]), torch.nn.ReLU()).cuda().train(), fuse=True
                ),
            }
            res = {}
            for label, m in mods.items():

                def it(m=m, x=x):  # bf16: x in bf16, the parameters f32 (as autocast leaves a BN's)
                    m(x).sum().backward()

                for _ in range(20):
                    it()
                best = []
                for _ in range(5):
                    torch.cuda.synchronize()
                    t = time.perf_counter()
                    for _ in range(200):
                        it()
                    best.append((time.perf_counter() - t) / 200 * 1e6)
                    torch.cuda.synchronize()
                res[label] = min(best)
            print(
                f"layer {shape} {dtype}: host µs / iteration torch {res['torch']:.1f} ours {res['ours']:.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
