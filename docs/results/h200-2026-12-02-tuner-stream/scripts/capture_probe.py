"""Why the tuner's event spans exceed the kernels: host time, capture status, graph nodes, a profiler timeline."""
import sys
import time
import traceback

import torch
from torch.profiler import ProfilerActivity, profile

from rust_kernels import driver, tuning
from rust_kernels.bench import ops as bops
from rust_kernels.bench.baselines import baseline

orig = tuning.time_plans
captured = []


def wrap(plans, launch, stream, info):
    res = orig(plans, launch, stream, info)
    captured.append((plans, launch, stream, info, res))
    return res


tuning.time_plans = wrap
tuning.use("force")
drv = driver.driver_module()
fbuf = None


def span(ev, a, b):
    return ev.elapsed_us(a, b)


def study(plan, launch, stream, info):
    h = drv.CUstream(stream)
    fbuf, nbytes = tuning._flush_buffer(info)
    ev = tuning._Events(drv)
    # a. host time per launch(plan)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(200):
        launch(plan)
    host = (time.perf_counter() - t) / 200 * 1e6
    torch.cuda.synchronize()
    a, b = ev.pair()
    ev.record(a, h)
    for _ in range(200):
        launch(plan)
    ev.record(b, h)
    driver.check(drv.cuEventSynchronize(b), "sync")
    print(
        f"  host us per launch(plan): {host:.1f}; "
        f"GPU us per call when issued back to back: {span(ev, a, b) / 200:.1f}"
    )
    # b. manual capture
    mode = drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
    print("  begin capture:", drv.cuStreamBeginCapture(h, mode)[0])
    err = None
    try:
        driver.check(drv.cuMemsetD8Async(fbuf, 0, nbytes, h), "memset")
        ev.record(a, h, True)
        launch(plan)
        ev.record(b, h, True)
    except Exception as e:
        err = e
        traceback.print_exc()
    res, graph = drv.cuStreamEndCapture(h)
    print("  launch during capture raised:", repr(err)[:300], "| end capture:", res)
    if res == drv.CUresult.CUDA_SUCCESS:
        r, nodes, n = drv.cuGraphGetNodes(graph, 0)
        r, nodes, n = drv.cuGraphGetNodes(graph, n)
        print("  nodes:", [str(drv.cuGraphNodeGetType(x)[1]).split(".")[-1] for x in nodes])
        r, exe = drv.cuGraphInstantiate(graph, 0)
        print("  instantiate:", r)
        times = []
        for _ in range(9):
            driver.check(drv.cuGraphLaunch(exe, h), "launch")
            driver.check(drv.cuEventSynchronize(b), "sync")
            times.append(span(ev, a, b))
        print("  graph [flush, ev, plan, ev] spans:", " ".join(f"{x:.1f}" for x in times))
        # c. profiler timeline of 3 graph launches
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            for _ in range(3):
                driver.check(drv.cuGraphLaunch(exe, h), "launch")
            torch.cuda.synchronize()
        evs = [e for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        evs.sort(key=lambda e: e.time_range.start)
        t0 = evs[0].time_range.start if evs else 0
        for e in evs:
            print(
                f"    {e.time_range.start - t0:9.1f} {e.time_range.end - t0:9.1f} "
                f"{e.time_range.end - e.time_range.start:7.1f}  {e.name[:70]}"
            )
    # d. a graph of 20 [ev, plan, ev] without flush
    pairs = [ev.pair() for _ in range(20)]
    print("  begin capture:", drv.cuStreamBeginCapture(h, mode)[0])
    try:
        for a2, b2 in pairs:
            ev.record(a2, h, True)
            launch(plan)
            ev.record(b2, h, True)
    except Exception as e:
        print("  raised", repr(e)[:200])
    res, graph = drv.cuStreamEndCapture(h)
    if res == drv.CUresult.CUDA_SUCCESS:
        r, exe = drv.cuGraphInstantiate(graph, 0)
        driver.check(drv.cuGraphLaunch(exe, h), "launch")
        driver.check(drv.cuStreamSynchronize(h), "sync")
        print("  graph of 20 [ev, plan, ev], no flush:", " ".join(f"{span(ev, x, y):.1f}" for x, y in pairs))
    ev.destroy()


for spec in sys.argv[1].split(";"):
    fam, shape, dtype = spec.split(":")
    shape = tuple(int(v) for v in shape.split("x"))
    b = baseline(fam)
    captured.clear()
    tuning.forget()
    calls = b.bench_calls(bops.device_tensors(b, shape, dtype))
    calls["ours"]()
    torch.cuda.synchronize()
    for plans, launch, stream, info, res in captured[:1]:
        ok = [i for i, (us, _) in enumerate(res) if us is not None]
        print(f"\n## {fam} {shape} {dtype}: plan {plans[ok[0]].label[:150]}; tuner said {res[ok[0]][0]:.1f}")
        study(plans[ok[0]], launch, stream, info)
    sys.stdout.flush()
