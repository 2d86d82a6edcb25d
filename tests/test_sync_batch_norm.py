"""rust_kernels.torch.SyncBatchNorm (issue 15.3): ranks of torch.distributed (gloo, on the CPU through the emulator)
normalising one batch split unevenly between them, some parts empty, against single-process float64 batch norm over
the whole batch; world size 1 and no process group (local batch statistics, as torch's), eval mode (no
communication), convert_sync_batchnorm and convert. The GPU test runs the synchronised step on one GPU, world size 1,
captured by a CUDA graph."""

from __future__ import annotations

import copy
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the rust_kernels[torch] tests need PyTorch (pip install torch==2.11.0)")

import torch.distributed as dist  # noqa: E402 (after the skip)
import torch.multiprocessing as mp  # noqa: E402

import rust_kernels.torch as rk_torch  # noqa: E402
from rust_kernels.families.batch_norm import forward, sync  # noqa: E402
from rust_kernels.torch import library  # noqa: E402

C, H, W = 3, 4, 4  # H * W = 16: 16-byte packs of f64 in NCHW; C = 3: single elements in channels_last
STEPS = 2
EPS = 1e-5
FORMATS = {"nchw": torch.contiguous_format, "channels_last": torch.channels_last}


def _parameters() -> tuple[Any, Any]:
    generator = torch.Generator().manual_seed(7)
    weight = torch.rand(C, generator=generator, dtype=torch.float64) + 0.5
    return weight, torch.randn(C, generator=generator, dtype=torch.float64)


def _batch(sizes: tuple[int, ...], step: int, layout: str) -> tuple[Any, Any]:
    """The whole batch of a step (x, dy), float64 in `layout`: rank r's part is rows sum(sizes[:r]) on."""
    generator = torch.Generator().manual_seed(100 * step + len(sizes))
    x = torch.randn(sum(sizes), C, H, W, generator=generator, dtype=torch.float64) * 2 + 1
    dy = torch.randn(sum(sizes), C, H, W, generator=generator, dtype=torch.float64)
    return x.contiguous(memory_format=FORMATS[layout]), dy.contiguous(memory_format=FORMATS[layout])


def _module(kind: type, momentum: float | None) -> Any:
    module = kind(C, eps=EPS, momentum=momentum).double()
    weight, bias = _parameters()
    with torch.no_grad():
        module.weight.copy_(weight), module.bias.copy_(bias)
    return module


def _steps(module: Any, sizes: tuple[int, ...], rank: int, layout: str) -> dict[str, Any]:
    """STEPS training steps of `module` on this rank's part (every part where rank is None), then an eval step:
    y and dx of each step, dweight and dbias of each (their own), and the running statistics at the end."""
    out: dict[str, Any] = {"y": [], "dx": [], "dweight": [], "dbias": []}
    lo, hi = (0, sum(sizes)) if rank is None else (sum(sizes[:rank]), sum(sizes[: rank + 1]))
    for step in range(STEPS):
        x, dy = (t[lo:hi] for t in _batch(sizes, step, layout))
        x.requires_grad_()
        module.zero_grad(set_to_none=True)
        y = module(x)
        assert y.is_contiguous(memory_format=FORMATS[layout])
        y.backward(dy)
        out["y"].append(y.detach())
        out["dx"].append(x.grad)
        out["dweight"].append(module.weight.grad)
        out["dbias"].append(module.bias.grad)
    module.eval()
    with torch.no_grad():
        out["eval"] = module(_batch(sizes, STEPS, layout)[0][lo:hi])
    module.train()
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        out[name] = getattr(module, name).clone()
    return out


def _rank(rank: int, sizes: tuple[int, ...], momentum: float | None, store: str, results: str, compiled: bool
          ) -> None:  # fmt: skip
    """One rank (a spawned process): its steps in both layouts (`compiled`: the module under torch.compile, whole
    graphs), saved for the test to compare."""
    world = len(sizes)
    timeout = datetime.timedelta(seconds=120)  # a rank left waiting fails the test rather than hanging it
    dist.init_process_group("gloo", store=dist.FileStore(store, world), rank=rank, world_size=world, timeout=timeout)
    try:
        out = {}
        for layout in FORMATS:
            module = _module(rk_torch.SyncBatchNorm, momentum)
            if compiled:  # aot_eager: dynamo, the operators' fakes and AOT autograd, no C++ compiler needed
                module = torch.compile(module, fullgraph=True, backend="aot_eager")
            out[layout] = _steps(module, sizes, rank, layout)
        torch.save(out, Path(results) / f"{rank}.pt")
    finally:
        dist.destroy_process_group()


def _spawn(tmp_path: Path, sizes: tuple[int, ...], momentum: float | None, compiled: bool) -> list[dict[str, Any]]:
    mp.spawn(_rank, args=(sizes, momentum, str(tmp_path / "store"), str(tmp_path), compiled), nprocs=len(sizes))
    return [torch.load(tmp_path / f"{rank}.pt") for rank in range(len(sizes))]


@pytest.mark.parametrize(
    ("sizes", "momentum", "compiled"),
    [((3, 5), 0.1, False), ((2, 0, 3), None, False), ((3, 5), 0.1, True)],
    ids=["2 ranks, uneven", "3 ranks, one empty, momentum=None", "2 ranks, uneven, torch.compile fullgraph"],
)
def test_ranks_normalise_the_whole_batch_as_single_process_batch_norm(tmp_path, sizes, momentum, compiled):
    """Each rank's y and dx are its slice of float64 batch norm's over the concatenated batch (both steps, both
    layouts), its dweight and dbias sum over the ranks to the single-process ones, the running statistics (unbiased
    variance; momentum=None the cumulative average) and num_batches_tracked are the single-process ones on every
    rank, and eval mode normalises each rank's part with them. Compiled, the collectives and the ops' operators are
    traced into one graph per step."""
    ranks = _spawn(tmp_path, sizes, momentum, compiled)
    starts = [sum(sizes[:r]) for r in range(len(sizes) + 1)]
    for layout in FORMATS:
        want = _steps(_module(torch.nn.BatchNorm2d, momentum), sizes, None, layout)
        for step in range(STEPS):
            for rank, got in enumerate(ranks):
                part = slice(starts[rank], starts[rank + 1])
                torch.testing.assert_close(got[layout]["y"][step], want["y"][step][part])
                torch.testing.assert_close(got[layout]["dx"][step], want["dx"][step][part])
            for name in ("dweight", "dbias"):
                total = sum(got[layout][name][step] for got in ranks)
                torch.testing.assert_close(total, want[name][step])
        for rank, got in enumerate(ranks):
            torch.testing.assert_close(got[layout]["eval"], want["eval"][starts[rank] : starts[rank + 1]])
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                torch.testing.assert_close(got[layout][name], want[name])


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The ops our modules run on CPU tensors, as they are called."""
    called: list[Any] = []
    run_host = library.run_host

    def spy(op: Any, *args: Any, **kwargs: Any) -> Any:
        called.append(op)
        return run_host(op, *args, **kwargs)

    monkeypatch.setattr(library, "run_host", spy)
    return called


@pytest.mark.parametrize("group", ["none", "world size 1"])
def test_one_rank_normalises_its_own_batch_as_torchs_does(monkeypatch, group):
    """No process group, or one of a single rank: local batch statistics on our training kernels (no collective),
    as torch.nn.SyncBatchNorm falls back to batch norm (on GPUs: on the CPU it refuses an initialised group)."""
    if group != "none":
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        called = _spy(monkeypatch)
        ours = _steps(_module(rk_torch.SyncBatchNorm, 0.1), (4,), 0, "channels_last")
        theirs = _steps(_module(torch.nn.BatchNorm2d, 0.1), (4,), 0, "channels_last")
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    assert forward.NATIVE in called and sync.MOMENTS not in called
    for name, want in theirs.items():
        torch.testing.assert_close(ours[name], want)


@pytest.mark.parametrize("batch", [3, 0], ids=["a part", "an empty part"])
def test_the_per_rank_ops_are_torch_operators_passing_opcheck(batch):
    """What torch.compile traces a synchronised step into: the four per-rank ops as operators (schema, fake,
    dispatch), both layouts, an empty part of the batch too."""
    ops = torch.ops.rust_kernels
    generator = torch.Generator().manual_seed(3)
    weight, bias = _parameters()
    for layout in FORMATS.values():
        x, dy = (torch.randn(batch, C, H, W, generator=generator, dtype=torch.float64).contiguous(memory_format=layout)
                 for _ in range(2))  # fmt: skip
        mean = torch.randn(C, generator=generator, dtype=torch.float64)
        invstd = torch.rand(C, generator=generator, dtype=torch.float64) + 0.5
        torch.library.opcheck(ops.batch_norm_2d_moments, (x,))
        torch.library.opcheck(ops.batch_norm_2d_normalize, (x, weight, bias, mean, invstd))
        torch.library.opcheck(ops.batch_norm_2d_backward_sums, (dy, x, weight, mean, invstd))
        sums = torch.randn(C, 2, generator=generator, dtype=torch.float64)
        torch.library.opcheck(ops.batch_norm_2d_backward_dx, (dy, x, weight, mean, invstd, sums))


def test_convert_sync_batchnorm_gives_ours_with_torchs_state():
    """Every batch norm becomes our SyncBatchNorm sharing the module's parameters and buffers, with torch's
    state_dict (loadable both ways) and process group; convert() turns torch's SyncBatchNorm into ours in place."""
    model = torch.nn.Sequential(torch.nn.Conv2d(3, C, 1), torch.nn.BatchNorm2d(C, momentum=0.2),
                                torch.nn.Sequential(torch.nn.BatchNorm2d(C, eps=1e-3)))  # fmt: skip
    model[2][0].eval()
    theirs = torch.nn.SyncBatchNorm.convert_sync_batchnorm(copy.deepcopy(model))
    params = [id(p) for p in model.parameters()]
    group = object()  # stands for a process group: kept as given
    converted = rk_torch.SyncBatchNorm.convert_sync_batchnorm(model, process_group=group)
    norms = [converted[1], converted[2][0]]
    assert all(type(m) is rk_torch.SyncBatchNorm and m.process_group is group for m in norms)
    assert isinstance(norms[0], torch.nn.SyncBatchNorm)
    assert (norms[0].momentum, norms[1].eps, norms[1].training) == (0.2, 1e-3, False)
    assert [id(p) for p in converted.parameters()] == params
    assert converted.state_dict().keys() == theirs.state_dict().keys()
    theirs[1].running_mean.fill_(0.5)
    converted.load_state_dict(theirs.state_dict())
    assert torch.equal(norms[0].running_mean, theirs[1].running_mean)
    norms[1].weight.data.fill_(2.0)
    theirs.load_state_dict(converted.state_dict())
    assert torch.equal(theirs[2][0].weight, norms[1].weight)
    plain = torch.nn.SyncBatchNorm(C, process_group=group)
    assert rk_torch.convert(plain) is plain and type(plain) is rk_torch.SyncBatchNorm and plain.process_group is group


@pytest.mark.gpu
def test_gpu_synchronised_step_on_one_rank_matches_batch_norm_and_is_captured_by_cuda_graphs():
    """World size 1 on one GPU (NCCL): the synchronised step (moments, all_gather, normalize; sums, all_reduce, dx)
    gives batch norm's y, gradients and running statistics, and a CUDA graph captures forward and backward."""
    from rust_kernels.torch.modules import _SyncBatchNorm2d

    dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1, device_id=torch.device("cuda", 0))
    try:
        group = dist.group.WORLD
        x, dy = (t.cuda() for t in _batch((8,), 0, "channels_last"))
        weight, bias = (t.cuda() for t in _parameters())

        def step(x: Any, dy: Any, statistics: tuple[Any, Any]) -> tuple[Any, ...]:
            leaves = [t.detach().clone().requires_grad_() for t in (x, weight, bias)]
            y = _SyncBatchNorm2d.apply(*leaves, *statistics, 0.1, EPS, group)
            y.backward(dy)
            return (y, *(t.grad for t in leaves))

        reference = (torch.zeros(C, dtype=torch.float64, device="cuda"), torch.ones_like(weight))
        leaves = [t.detach().clone().requires_grad_() for t in (x, weight, bias)]
        y = torch.nn.functional.batch_norm(leaves[0], *reference, leaves[1], leaves[2], True, 0.1, EPS)
        y.backward(dy)
        statistics = (torch.zeros_like(reference[0]), torch.ones_like(reference[1]))
        for got, want in zip(step(x, dy, statistics), (y, *(t.grad for t in leaves)), strict=True):
            torch.testing.assert_close(got, want)
        for got, want in zip(statistics, reference, strict=True):
            torch.testing.assert_close(got, want)
        static_x, static_dy = x.clone(), dy.clone()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            step(static_x, static_dy, statistics)  # warm: every launch's signature decided before the capture
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = step(static_x, static_dy, statistics)
        static_x.copy_(x * 2)
        before = statistics[0].clone()
        graph.replay()
        torch.cuda.synchronize()
        for got, want in zip(captured, step(x * 2, dy, (statistics[0].clone(), statistics[1].clone())), strict=True):
            torch.testing.assert_close(got, want)
        assert not torch.equal(before, statistics[0])
    finally:
        dist.destroy_process_group()


def test_the_two_gpu_script_checks_ours_on_gloo_without_gpus(tmp_path):
    """scripts/sync_batch_norm_2gpu.py, the multi-GPU run (torchrun, one process per GPU), without GPUs: two gloo
    ranks check ours, eager and compiled, against float64 batch norm in every cell it can run on the CPU, and it
    names what it did not run."""
    script = Path(__file__).parents[1] / "scripts" / "sync_batch_norm_2gpu.py"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(script),
               "--out", str(tmp_path)]  # fmt: skip
    run = subprocess.run(command, capture_output=True, text=True, timeout=600,
                         env=os.environ | {"CUDA_VISIBLE_DEVICES": ""})  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    results = json.loads((tmp_path / "sync.json").read_text())
    assert (results["backend"], results["world"]) == ("gloo", 2) and "GPU" in results["not_run"]
    cells = results["correctness"]  # (3, 5) and (0, 8) ranks' parts, 2 layouts, 6 quantities
    assert len(cells) == 24 and all(c["passed"] and max(c["ours_err"], c["compiled_err"]) < 1e-5 for c in cells), cells
