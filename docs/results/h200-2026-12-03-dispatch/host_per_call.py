"""Host cost per call of our fused BN + ReLU operators, by path, with the GPU kept busy (a queued spin first, so no
launch waits on a full queue): what a compiled graph's call costs the host, and its parts. Then where a compiled
ResNet-50 step's host time goes (torch.profiler, CPU side: the launch calls' own durations separate issuing from
waiting). Usage: python host_per_call.py"""
import statistics
import time

import torch
import torchvision
from torch.profiler import ProfilerActivity, profile

import rust_kernels.torch as rk
from rust_kernels.families.batch_norm import activation
from rust_kernels.torch import library

OPS = torch.ops.rust_kernels
CALLS, ROUNDS = 300, 7


def host_us(fn):
    """Median over rounds of host µs per call, N calls issued behind a GPU spin longer than their issue time."""
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(ROUNDS):
        torch.cuda._sleep(int(3e8))  # ~150 ms of GPU spin: the calls queue behind it
        t = time.perf_counter()
        for _ in range(CALLS):
            fn()
        out.append((time.perf_counter() - t) / CALLS * 1e6)
        torch.cuda.synchronize()
    return statistics.median(out)


def per_call():
    torch.manual_seed(0)
    x = torch.randn(32, 64, 28, 28, device="cuda", dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
    c = x.shape[1]
    weight = torch.rand(c, device="cuda", requires_grad=True)
    bias = torch.randn(c, device="cuda", requires_grad=True)
    mean, var = torch.zeros(c, device="cuda"), torch.ones(c, device="cuda")
    tensors = (x, weight, bias, mean, var)
    scalars = (0.1, 1e-5, "relu")
    fwd = OPS.batch_norm_2d_act_forward.default
    with torch.no_grad():
        y, sm, si = fwd(*tensors, *scalars)
        dy = torch.randn_like(y)
        btensors = (dy, x, weight, bias, sm, si)
        bwd = OPS.batch_norm_2d_act_backward.default
        bwd(*btensors, 1e-5, "relu")
        rows = []
        rows.append(("forward: op.fast (the native fast path alone)",
                     host_us(lambda: activation.FORWARD.fast(tensors, scalars))))
        rows.append(("forward: run_cuda (the CUDA kernel's body)",
                     host_us(lambda: library.run_cuda(activation.FORWARD, *tensors, *scalars))))
        rows.append(("forward: operator, scalars by name (Inductor's call), no_grad",
                     host_us(lambda: fwd(*tensors, momentum=0.1, eps=1e-5, activation="relu"))))
        rows.append(("forward: operator, positional, no_grad", host_us(lambda: fwd(*tensors, *scalars))))
        with torch._C._AutoDispatchBelowAutograd():  # how the Autograd kernel called the CUDA kernel before
            rows.append(("forward: operator called below autograd (the second crossing, before)",
                         host_us(lambda: fwd(*tensors, *scalars))))
        rows.append(("backward: op.fast", host_us(lambda: activation.BACKWARD.fast(btensors, (1e-5, "relu")))))
        rows.append(("backward: operator, no_grad", host_us(lambda: bwd(*btensors, eps=1e-5, activation="relu"))))
        rows.append(("torch: aten.native_batch_norm (training), no_grad",
                     host_us(lambda: torch.ops.aten.native_batch_norm.default(*tensors, True, 0.1, 1e-5))))
        rows.append(("torch: aten.relu", host_us(lambda: torch.ops.aten.relu.default(x))))
        rows.append(("torch: empty_like(x)", host_us(lambda: torch.empty_like(x))))

        def signature_reads():
            for a in btensors:
                a.get_device(), a.data_ptr(), a.dtype, a.is_contiguous(), a.is_neg(), a.shape
        rows.append(("python: the fast path's per-array reads, 6 arrays", host_us(signature_reads)))
    rows.append(("forward: operator with grad (autograd.Function)", host_us(lambda: fwd(*tensors, *scalars))))
    rows.append(("eager module path: rk.batch_norm_act_2d with grad",
                 host_us(lambda: rk.batch_norm_act_2d(x, mean, var, weight, bias, 0.1, 1e-5, "relu"))))
    print(f"host µs per call, median of {ROUNDS} rounds of {CALLS} calls behind a GPU spin "
          "(bf16 x (32, 64, 28, 28) channels_last, f32 parameters)")
    for name, us in rows:
        print(f"  {us:8.2f}  {name}")


def step_profile(fmt_name):
    fmt = torch.channels_last if fmt_name == "cl" else torch.contiguous_format
    torch.manual_seed(0)
    base = torchvision.models.resnet50().cuda().to(memory_format=fmt).train()
    x = torch.randn(128, 3, 224, 224, device="cuda").contiguous(memory_format=fmt)
    y = torch.randint(0, 1000, (128,), device="cuda")
    import copy
    for name, model in (("torch", copy.deepcopy(base)), ("ours", rk.convert(copy.deepcopy(base), fuse=True))):
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        cmodel = torch.compile(model)

        def step():
            with torch.autocast("cuda", torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(cmodel(x), y)  # noqa: B023 (called in this iteration)
            loss.backward()
            opt.step()  # noqa: B023 (called in this iteration)
            opt.zero_grad(set_to_none=True)  # noqa: B023 (called in this iteration)
        for _ in range(6):
            step()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                step()
            torch.cuda.synchronize()
        print(f"== {name} {fmt_name}: CPU-side events per step (count, total ms, mean µs)")
        keys = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
        for e in keys[:18]:
            print(f"  {e.count // 3:6d}  {e.self_cpu_time_total / 3e3:8.2f} ms self  "
                  f"{e.cpu_time_total / max(e.count, 1):8.1f} µs  {e.key[:90]}")
        for e in keys:
            if "Launch" in e.key or e.key.startswith("rust_kernels::"):
                print(f"  launch/op {e.key[:60]}: {e.count // 3} per step, mean {e.cpu_time_total / e.count:.1f} µs,"
                      f" {e.cpu_time_total / 3e3:.2f} ms per step")


if __name__ == "__main__":
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    per_call()
    step_profile("cl")
