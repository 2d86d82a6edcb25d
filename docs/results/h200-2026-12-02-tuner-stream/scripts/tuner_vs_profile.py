"""Tuner timing experiment: per candidate plan, µs under several timing variants vs profiler kernel durations."""
import statistics
import sys
from functools import partial

import torch
from torch.profiler import ProfilerActivity, profile

from rust_kernels import driver, tuning
from rust_kernels.bench import ops as bops
from rust_kernels.bench.baselines import baseline

MAXP = int(sys.argv[2]) if len(sys.argv) > 2 else 10
orig = tuning.time_plans
captured = []


def wrap(plans, launch, stream, info):
    res = orig(plans, launch, stream, info)
    captured.append((plans, launch, stream, info, res))
    return res


tuning.time_plans = wrap
tuning.use("force")
tflush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
torch.cuda._sleep(1_000_000)
s.record()
torch.cuda._sleep(1_000_000)
e.record()
e.synchronize()
CYC = 1_000_000 / (s.elapsed_time(e) * 1e3)
print(f"cycles/us {CYC:.0f}")


def measure(plans, launch, stream, info, flush="memset", spin=0.0, graph=True, empty=False, reps=9):
    drv = driver.driver_module()
    h = drv.CUstream(stream)
    fbuf, nbytes = tuning._flush_buffer(info)
    ev = tuning._Events(drv)
    gr = tuning._Graphs(drv, h)
    ext = torch.cuda.ExternalStream(stream)
    samples = {i: [] for i in range(len(plans))}

    def rep(pairs, captured):
        for i, (a, b) in pairs.items():
            if flush == "memset":
                driver.check(drv.cuMemsetD8Async(fbuf, 0, nbytes, h), "memset")
            elif flush == "torch":
                with torch.cuda.stream(ext):
                    tflush.zero_()
            if spin:
                with torch.cuda.stream(ext):
                    torch.cuda._sleep(int(spin * CYC))
            ev.record(a, h, captured)
            if not empty:
                launch(plans[i])
            ev.record(b, h, captured)

    try:
        for _ in range(reps):
            pairs = {i: ev.pair() for i in range(len(plans))}
            if graph:
                gr.run(partial(rep, pairs))
            else:
                rep(pairs, False)
            for i, p in pairs.items():
                samples[i].append(p)
        driver.check(drv.cuStreamSynchronize(h), "sync")
        return [statistics.median(ev.elapsed_us(a, b) for a, b in samples[i]) for i in range(len(plans))]
    finally:
        gr.destroy()
        ev.destroy()


def prof(plan, launch, stream):
    ext = torch.cuda.ExternalStream(stream)
    with torch.cuda.stream(ext):
        for _ in range(2):
            launch(plan)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            for _ in range(5):
                tflush.zero_()
                launch(plan)
            torch.cuda.synchronize()
    t = 0.0
    for a in p.key_averages():
        d = getattr(a, "device_time_total", None) or getattr(a, "cuda_time_total", 0)
        if d and "FillFunctor<unsigned char>" not in a.key:
            t += d
    return t / 5


VARIANTS = {
    "g-mem": dict(),
    "g-mem-spin50": dict(spin=50),
    "g-none": dict(flush=None),
}
EMPTY = {"E:g-mem": dict(empty=True)}

for spec in sys.argv[1].split(";"):
    fam, shape, dtype = spec.split(":")
    shape = tuple(int(v) for v in shape.split("x"))
    b = baseline(fam)
    captured.clear()
    tuning.forget()
    calls = b.bench_calls(bops.device_tensors(b, shape, dtype))
    calls["ours"]()
    torch.cuda.synchronize()
    for plans, launch, stream, info, res in captured:
        ok = [i for i, (us, _) in enumerate(res) if us is not None][:MAXP]
        ps = [plans[i] for i in ok]
        print(
            f"\n## {fam} {shape} {dtype}: {len(plans)} candidates, {len(ps)} shown; "
            "tuner(orig) | variants | profiler"
        )
        cols = {"orig": [res[i][0] for i in ok]}
        for name, kw in VARIANTS.items():
            cols[name] = measure(ps, launch, stream, info, **kw)
        cols["prof"] = [prof(p, launch, stream) for p in ps]
        for name, kw in EMPTY.items():
            print(f"  empty span {name}: {statistics.median(measure(ps, launch, stream, info, **kw)):.1f} us")
        print("  " + " ".join(f"{c:>13s}" for c in cols) + "  plan")
        for j, p in enumerate(ps):
            print("  " + " ".join(f"{cols[c][j]:13.1f}" for c in cols) + "  " + p.label[:110])
        # rank agreement with the profiler
        best_prof = min(range(len(ps)), key=lambda j: cols["prof"][j])
        for c in cols:
            pick = min(range(len(ps)), key=lambda j: cols[c][j])
            print(
                f"  pick {c:>13s}: plan {pick} prof {cols['prof'][pick]:.1f} us "
                f"(best prof {cols['prof'][best_prof]:.1f})"
            )
    sys.stdout.flush()
