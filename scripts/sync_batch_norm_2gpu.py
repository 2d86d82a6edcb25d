"""rust_kernels.torch.SyncBatchNorm across processes, one per GPU (NCCL), against torch.nn.SyncBatchNorm:

    torchrun --nproc_per_node=2 scripts/sync_batch_norm_2gpu.py [--out DIR] [--batch 64] [--steps 20]

1. correctness: per-rank batches (3, 5) and (0, 8) (one rank empty), NCHW and channels_last, f32 and bf16
   activations with f32 parameters (what a bf16-autocast convolution hands BN): ours and torch's SyncBatchNorm
   against single-process float64 batch norm over the concatenated batch: each rank's y and dx, the running
   statistics, dweight and dbias averaged over the ranks as DDP averages them; ours also under
   torch.compile(fullgraph=True) (Inductor; aot_eager on CPU tensors). A cell passes where ours, eager and compiled,
   is within the dtype's floor or twice torch's error, whichever is larger;
2. CUDA-graph capture of our SyncBatchNorm's forward + backward on every rank, replayed against eager;
3. a DDP training step of torchvision ResNet-50 (--batch per GPU, bf16 autocast, SGD) with SyncBatchNorm, ours
   (convert_sync_batchnorm) vs torch's, NCHW and channels_last: median step ms (CUDA events, --steps after 5), and
   the collectives the BN layers issue per step with their bytes (DDP's own gradient all_reduce is not counted).

Without a GPU per rank it runs part 1 on CPU tensors with gloo (ours only: torch's SyncBatchNorm needs CUDA; our
kernels in the host emulator) and says what it did not run. Processes inherit the environment: keep
NCCL_NVLS_ENABLE=0 and the machine's other multicast settings. Rank 0 prints the tables and writes DIR/sync.json.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

import rust_kernels.torch as rk_torch

C, H, W = 16, 6, 10  # H * W = 60: rows that are no multiple of a 16-byte pack
EPS, MOMENTUM, STEPS = 1e-5, 0.1, 2
FLOOR = {torch.float32: 1e-5, torch.bfloat16: 2e-2}  # error (relative to the reference's largest value) always passed
FORMATS = {"nchw": torch.contiguous_format, "channels_last": torch.channels_last}


def _error(got: torch.Tensor, want: torch.Tensor) -> float:
    scale = want.abs().max().item() if want.numel() else 1.0
    return (got.double() - want).abs().max().item() / max(scale, 1e-30) if want.numel() else 0.0


def _module(kind: type, device: torch.device) -> Any:
    generator = torch.Generator().manual_seed(7)
    module = kind(C, eps=EPS, momentum=MOMENTUM).to(device)
    with torch.no_grad():
        module.weight.copy_(torch.rand(C, generator=generator) + 0.5)
        module.bias.copy_(torch.randn(C, generator=generator))
    return module


def _batch(total: int, step: int, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """A step's whole batch (x, dy) in float64; the same on every rank (a seeded CPU generator)."""
    generator = torch.Generator().manual_seed(1000 * step + total)
    x = torch.randn(total, C, H, W, generator=generator, dtype=torch.float64) * 3 + 2
    dy = torch.randn(total, C, H, W, generator=generator, dtype=torch.float64)
    return x.contiguous(memory_format=FORMATS[layout]), dy.contiguous(memory_format=FORMATS[layout])


def _run(module: Any, sizes: tuple[int, ...], layout: str, dtype: torch.dtype, device: torch.device) -> dict:
    """STEPS training steps of `module` on this rank's part (the whole batch where module is torch's BatchNorm2d in
    float64, the reference): y, dx, DDP-averaged dweight and dbias of the last step, the running statistics."""
    rank, world = dist.get_rank(), dist.get_world_size()
    reference = type(module) is torch.nn.BatchNorm2d
    lo, hi = (0, sum(sizes)) if reference else (sum(sizes[:rank]), sum(sizes[: rank + 1]))
    for step in range(STEPS):
        want = torch.float64 if reference else dtype
        x, dy = (t[lo:hi].to(device, want) for t in _batch(sum(sizes), step, layout))
        x.requires_grad_()
        module.zero_grad(set_to_none=True)
        y = module(x)
        y.backward(dy)
    grads = [module.weight.grad.clone(), module.bias.grad.clone()]
    if not reference:
        for g in grads:  # DDP: the mean over the ranks
            dist.all_reduce(g)
            g /= world
    else:
        grads = [g / world for g in grads]
    out = {"y": y.detach(), "dx": x.grad, "dweight": grads[0], "dbias": grads[1],
           "running_mean": module.running_mean, "running_var": module.running_var}  # fmt: skip
    if reference:  # this rank's slice of the whole batch's y and dx
        part = slice(sum(sizes[:rank]), sum(sizes[: rank + 1]))
        out["y"], out["dx"] = out["y"][part], out["dx"][part]
    return out


def correctness(device: torch.device) -> list[dict]:
    world = dist.get_world_size()
    rows = []
    dtypes = (torch.float32, torch.bfloat16) if device.type == "cuda" else (torch.float32,)
    for sizes in ((3, 5) + (4,) * (world - 2), (0, 8) + (4,) * (world - 2)):
        for layout in FORMATS:
            want = _run(_module(torch.nn.BatchNorm2d, device).double(), sizes, layout, torch.float64, device)
            for dtype in dtypes:
                got = {"ours": _run(_module(rk_torch.SyncBatchNorm, device), sizes, layout, dtype, device)}
                backend = "inductor" if device.type == "cuda" else "aot_eager"  # aot_eager: no C++ compiler needed
                compiled = torch.compile(_module(rk_torch.SyncBatchNorm, device), fullgraph=True, backend=backend)
                got["compiled"] = _run(compiled, sizes, layout, dtype, device)
                if device.type == "cuda":
                    got["torch"] = _run(_module(torch.nn.SyncBatchNorm, device), sizes, layout, dtype, device)
                for name in want:
                    errors = {side: _error(out[name], want[name]) for side, out in got.items()}
                    # the worst over the ranks
                    errors = {side: _all_max(e, device) for side, e in errors.items()}
                    bound = max(FLOOR[dtype], 2 * errors.get("torch", 0.0))
                    rows.append({"sizes": list(sizes), "layout": layout, "dtype": str(dtype).removeprefix("torch."),
                                 "quantity": name, **{f"{s}_err": e for s, e in errors.items()}, "bound": bound,
                                 "passed": max(errors["ours"], errors["compiled"]) <= bound})  # fmt: skip
    return rows


def _all_max(value: float, device: torch.device) -> float:
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def graph_capture(device: torch.device) -> dict:
    """Our SyncBatchNorm's forward + backward captured in a CUDA graph on every rank; a replay against eager."""
    module = _module(rk_torch.SyncBatchNorm, device)
    x, dy = (t[: 4 + dist.get_rank()].to(device, torch.float32) for t in _batch(16, 0, "channels_last"))
    x.requires_grad_()

    def step() -> torch.Tensor:
        x.grad = None
        y = module(x)
        y.backward(dy)
        return y

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            eager = step()
    torch.cuda.current_stream().wait_stream(stream)
    eager, eager_dx = eager.detach().clone(), x.grad.clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_y = step()
    static_dx = x.grad
    graph.replay()
    torch.cuda.synchronize()
    same = torch.equal(static_y, eager) and torch.equal(static_dx, eager_dx)
    return {"replay_equals_eager": bool(_all_max(0.0 if same else 1.0, device) == 0.0)}


class Collectives:
    """The torch.distributed collectives called from Python while counting (both SyncBatchNorms issue theirs so):
    name -> [calls, bytes]."""

    NAMES = ("all_gather_into_tensor", "all_gather", "all_reduce", "reduce_scatter_tensor", "broadcast")

    def __init__(self) -> None:
        self.counts: dict[str, list[int]] = {}
        self.counting = False
        for name in self.NAMES:
            setattr(dist, name, self._wrap(name, getattr(dist, name)))

    def _wrap(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            if self.counting:
                tensors = [a for a in args if isinstance(a, torch.Tensor)]
                entry = self.counts.setdefault(name, [0, 0])
                entry[0] += 1
                entry[1] += sum(t.numel() * t.element_size() for t in tensors[-1:])  # what this rank sends
            return function(*args, **kwargs)

        return counted


def _step(ddp: Any, optimizer: Any, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    with torch.autocast("cuda", torch.bfloat16):
        loss = F.cross_entropy(ddp(x), target)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


def ddp_step(device: torch.device, batch: int, steps: int, collectives: Collectives) -> list[dict]:
    import torchvision
    from torch.nn.parallel import DistributedDataParallel

    rows = []
    for layout, fmt in FORMATS.items():
        torch.manual_seed(0)
        base = torchvision.models.resnet50()
        x = torch.randn(batch, 3, 224, 224, device=device).contiguous(memory_format=fmt)
        target = torch.randint(0, 1000, (batch,), device=device)
        for side, convert in (("torch", torch.nn.SyncBatchNorm.convert_sync_batchnorm),
                              ("ours", rk_torch.SyncBatchNorm.convert_sync_batchnorm)):  # fmt: skip
            model = convert(copy.deepcopy(base)).to(device, memory_format=fmt).train()
            layers = sum(isinstance(m, torch.nn.SyncBatchNorm) for m in model.modules())
            ddp = DistributedDataParallel(model, device_ids=[device.index])
            optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
            for _ in range(5):
                _step(ddp, optimizer, x, target)
            collectives.counts.clear()
            collectives.counting = True
            _step(ddp, optimizer, x, target)
            collectives.counting = False
            times = []
            for _ in range(steps):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                loss = _step(ddp, optimizer, x, target)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            rows.append({"layout": layout, "side": side, "step_ms": _all_max(statistics.median(times), device),
                         "loss": loss.item(), "bn_layers": layers,
                         "collectives_per_layer": {n: [c / layers, b / layers]
                                                   for n, (c, b) in collectives.counts.items()}})  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("sync-out"))
    parser.add_argument("--batch", type=int, default=64, help="ResNet-50 batch per GPU (64)")
    parser.add_argument("--steps", type=int, default=20, help="timed DDP steps per side (20)")
    args = parser.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    gpus = torch.cuda.is_available() and torch.cuda.device_count() >= world
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if gpus else torch.device("cpu")
    if gpus:
        torch.cuda.set_device(device)
    collectives = Collectives()
    dist.init_process_group("nccl" if gpus else "gloo", device_id=device if gpus else None)
    try:
        results: dict[str, Any] = {"world": world, "backend": dist.get_backend(), "correctness": correctness(device)}
        if gpus:
            results["graph"] = graph_capture(device)
            results["ddp"] = ddp_step(device, args.batch, args.steps, collectives)
        else:
            results["not_run"] = "torch.nn.SyncBatchNorm, bf16, CUDA-graph capture and the DDP step need a GPU per rank"
        dist.barrier()  # every rank done before any tears its connections down (gloo aborts a peer that is not)
    finally:
        dist.destroy_process_group()
    if rank == 0:
        _report(results, args.out)


def _report(results: dict, out: Path) -> None:
    rows = results["correctness"]
    print(f"SyncBatchNorm, {results['world']} ranks, {results['backend']}")
    print("correctness (error relative to the float64 reference's largest value, worst rank):")
    for r in rows:
        torch_err = f"{r['torch_err']:.2e}" if "torch_err" in r else "n/a"
        print(f"  {r['sizes']!s:10} {r['layout']:13} {r['dtype']:8} {r['quantity']:12} ours {r['ours_err']:.2e} "
              f"compiled {r['compiled_err']:.2e} torch {torch_err} bound {r['bound']:.2e} "
              f"{'ok' if r['passed'] else 'FAILED'}")  # fmt: skip
    print(f"correctness: {sum(r['passed'] for r in rows)} of {len(rows)} passed")
    if "graph" in results:
        print(f"CUDA graph: replay equals eager on every rank: {results['graph']['replay_equals_eager']}")
    for r in results.get("ddp", []):
        print(f"DDP ResNet-50 {r['layout']:13} {r['side']:5}: {r['step_ms']:.2f} ms/step, loss {r['loss']:.4f}, "
              f"{r['bn_layers']} BN layers, per layer per step: {r['collectives_per_layer']}")  # fmt: skip
    ddp = {(r["layout"], r["side"]): r["step_ms"] for r in results.get("ddp", [])}
    for layout in FORMATS:
        if (layout, "ours") in ddp:
            print(f"DDP step {layout}: ours vs torch {ddp[layout, 'torch'] / ddp[layout, 'ours']:.2f}x")
    if "not_run" in results:
        print(f"not run: {results['not_run']}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "sync.json").write_text(json.dumps(results, indent=1))
    print(f"wrote {out / 'sync.json'}")


if __name__ == "__main__":
    main()
