"""The model benchmark (`bench --models`): torchvision models training, with PyTorch's BN ("torch") against ours
("ours": `rust_kernels.torch.convert` of a deep copy of the same model), side by side in one process on identical
weights and inputs.

One cell per model x batch x dtype x mode, for the plan's BN mode and memory format:

- the step: `model.train()`; with BN "frozen" (fine-tuning, the default) every BN module back in eval (running
  statistics used and not updated, weight and bias trainable, the rest of the model trains); with BN "train" every
  BN module trains (batch statistics, running statistics updated); the forward in f32, or in bf16 through
  `torch.autocast` with f32 master weights; cross-entropy on random labels; backward; SGD (momentum 0.9). With BN
  "eval" the step is inference instead: `model.eval()`, the forward alone under `torch.no_grad()`. The BN
  statistics are first made realistic: each model's BN layers are calibrated once on random images in training mode
  (weights=None, no downloads), so the frozen network normalises its activations as a pretrained one would.
  The memory format: the model and its inputs contiguous, or in channels_last (that of mixed-precision CNN training);
- modes: "eager" (the step as Python runs it), "graph" (the whole step, forward, backward and optimizer step,
  captured by `torch.cuda.graph` on static inputs after warm-up on a side stream, as PyTorch documents whole-network
  capture, then replayed) and "compile" (the model's forward and backward through `torch.compile`, default options;
  compiled during the warm-up);
- step time: CUDA events between steps, in blocks of BLOCK steps issued back to back (the host runs ahead as in a
  training loop), torch's and ours alternating block by block, synchronised between blocks; the median over --steps
  steps per side, after --warmup untimed steps. "host ms" is the host time to issue one step (the median over the
  blocks' first steps): a step whose host time reaches its GPU time is limited by the host;
- gradients: after the warm-up (and the capture), ours gets torch's weights and each side runs one step eagerly
  (through torch.compile in compile cells), dropout and stochastic depth dropping nothing, as does a float64 copy of
  torch's model on the same inputs. Each side's gradients are compared with float64's: per parameter
  ||g - g64|| / ||g64|| (over the whole model's gradient norm where g64 vanishes: a BN bias that reaches a
  training-mode BN through linear layers alone has no gradient in exact arithmetic, and any rounded one is noise).
  Torch's own error is the yardstick, as rounding differences grow through a deep network's backward (ours and
  torch's f32 gradients differ by percent on a ResNet-50 in training): the target is ours' worst error at most
  GRAD_RATIO times torch's. In inference (BN "eval") the logits are compared so, under the name "logits". A float64
  model that does not fit in memory makes the comparison n/a;
- BN's share: torch.profiler over --profile-steps eager steps per (model, batch, dtype) and side, run after all the
  timing so the profiler never touches a timed step: the CUDA time of kernels whose names look like batch norm
  (BN_PATTERNS; ours are named batch_norm_2d_nchw_*) over the CUDA time of all kernels, memory copies and sets. The
  same figures stand on every mode's row of that (model, batch, dtype).

A failure (a model that does not build, a convert that raises, a capture that fails, out of memory) makes the part
it hits n/a with the reason, in that cell only; the run goes on. PyTorch is passed in (`torch`), never imported here;
everything runs on the CPU too (timed by the host clock, no graphs, no profile), which the tests use.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import gc
import importlib
import itertools
import math
import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from rust_kernels.bench import report
from rust_kernels.bench.report import fmt, ratio, times
from rust_kernels.progress import Progress

MODELS = ("resnet50", "mobilenet_v2")
BATCHES = (64, 256)
DTYPES = ("f32", "bf16")  # bf16: torch.autocast(bfloat16), f32 master weights
MODES = ("eager", "graph")
ALL_MODES = (*MODES, "compile")
BN_MODES = ("frozen", "train", "eval")  # fine-tuning, training, inference
MEMORY_FORMATS = ("contiguous", "channels_last")
SIDES = ("torch", "ours")
STEPS = 20  # timed steps per side and cell
WARMUP = 5  # untimed steps per side before the gradient check and the timing
GRAPH_WARMUP = 3  # the least warm-up on a side stream before a capture (PyTorch's whole-network example)
BLOCK = 5  # steps per side issued back to back between synchronisations
PROFILE_STEPS = 2  # profiled eager steps per side and (model, batch, dtype); 0: no profile
BUDGET_S = 420.0  # past this, the cells and profiles not yet begun are n/a (files still written); 0: no limit
IMAGE = 224
CLASSES = 1000
LR = 1e-3
MOMENTUM = 0.9
CALIBRATION = (4, 16)  # batches x images of random data through the BN layers in training mode, once per model
SEED = 0
GRAD_RATIO = 2.0  # ours' worst gradient error against float64 at most this many times torch's (`grad o/t`)
VANISHING = 1e-10  # a float64 gradient at most this fraction of the model's gradient norm: none in exact arithmetic
ROUNDING = {"f32": 2.0**-24, "bf16": 2.0**-8}  # the unit roundoff: the least error the yardstick is taken as
SPEEDUP_TARGET = 1.0
BN_PATTERNS = ("batch_norm", "batchnorm", "bn_")  # lower-cased substrings of BN kernels' names
OURS_PATTERN = "batch_norm_2d_nchw"  # in the entry names of our BN kernels
TOP_KERNELS = 12
MAX_REASON = 400
SHOWN_NAME = 140  # characters of a kernel name in the printed lists (the CSV has them whole)


def reason(err: BaseException) -> str:
    """One line saying why: the exception's type and first line, and the one it happened during, if any (a failed
    capture often ends in a second error that hides the first)."""

    def line(e: BaseException) -> str:
        text = str(e).strip()
        return f"{type(e).__name__}: {text.splitlines()[0]}" if text else type(e).__name__

    text = line(err)
    during = err.__cause__ if err.__cause__ is not None else None if err.__suppress_context__ else err.__context__
    if during is not None and during is not err:
        text += f" (during {line(during)})"
    return text[:MAX_REASON]


# --- the model in training with BN frozen -----------------------------------------------------------------------------
def batch_norms(torch: Any, model: Any) -> list[Any]:
    """The model's BN modules (every subclass of torch's _BatchNorm: ours are BatchNorm2d's)."""
    base = torch.nn.modules.batchnorm._BatchNorm
    return [m for m in model.modules() if isinstance(m, base)]


def freeze_batchnorm(torch: Any, model: Any) -> list[Any]:
    """Fine-tuning with BN frozen: the model trains, every BN module is back in eval mode (running statistics used,
    not updated) with its weight and bias trainable. Returns the BN modules."""
    model.train()
    norms = batch_norms(torch, model)
    for bn in norms:
        bn.eval()
        for p in (bn.weight, bn.bias):
            if p is not None:
                p.requires_grad_(True)
    return norms


def calibrate(torch: Any, model: Any, device: Any, batches: int, images: int, image: int, seed: int = SEED) -> None:
    """Gives the BN layers the running statistics of the data (cumulative averages over `batches` random batches in
    training mode), as a pretrained model has: frozen BN then normalises instead of passing activations through."""
    norms = batch_norms(torch, model)
    momenta = [bn.momentum for bn in norms]
    generator = torch.Generator(device=device).manual_seed(seed + 1)
    model.train()
    for bn in norms:
        bn.reset_running_stats()
        bn.momentum = None  # cumulative average
    with torch.no_grad():
        for _ in range(batches):
            model(torch.randn(images, 3, image, image, device=device, generator=generator))
    for bn, momentum in zip(norms, momenta, strict=True):
        bn.momentum = momentum


def make_inputs(torch: Any, device: Any, batch: int, image: int, classes: int, seed: int = SEED) -> tuple[Any, Any]:
    """Random images and labels, the same for both sides (static: a graph reads them where they are)."""
    generator = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(batch, 3, image, image, device=device, generator=generator)
    y = torch.randint(0, classes, (batch,), device=device, generator=generator)
    return x, y


def copy_weights(torch: Any, source: Any, target: Any) -> None:
    """`target`'s parameters and buffers become `source`'s, in place (a captured graph keeps reading them)."""
    with torch.no_grad():
        params, buffers = dict(target.named_parameters()), dict(target.named_buffers())
        for name, p in source.named_parameters():
            params[name].copy_(p)
        for name, b in source.named_buffers():
            if name in buffers:  # a converted module may keep buffers of its own
                buffers[name].copy_(b)


def changed_statistics(torch: Any, model: Any, state: Mapping[str, Any]) -> list[str]:
    """The BN running statistics of `model` that no longer equal `state`'s (frozen BN must leave them alone)."""
    changed = []
    for prefix, bn in model.named_modules():
        if isinstance(bn, torch.nn.modules.batchnorm._BatchNorm):
            for name in ("running_mean", "running_var"):
                key = f"{prefix}.{name}" if prefix else name
                value = getattr(bn, name)
                if value is not None and key in state and not torch.equal(value, state[key]):
                    changed.append(key)
    return changed


def named_grads(model: Any) -> dict[str, Any]:
    return {name: p.grad for name, p in model.named_parameters() if p.requires_grad}


@contextlib.contextmanager
def dropping_nothing(torch: Any, *models: Any) -> Iterator[None]:
    """Every dropout and stochastic-depth module of `models` with p = 0 inside the block."""
    kept = [(m, m.p) for model in models for m in model.modules()
            if isinstance(m, torch.nn.modules.dropout._DropoutNd) or type(m).__name__ == "StochasticDepth"]  # fmt: skip
    try:
        for m, _ in kept:
            m.p = 0.0
        yield
    finally:
        for m, p in kept:
            m.p = p


class Side:
    """One side of a cell: its model reset to the cell's weights with BN frozen (or as `bn` says), a fresh SGD, the
    static inputs, and the step, run eagerly or as the replay of its captured graph."""

    def __init__(self, torch: Any, model: Any, state: Mapping[str, Any], x: Any, y: Any, dtype: str,
                 bn: str = "frozen", channels_last: bool = False, compiled: bool = False) -> None:  # fmt: skip
        model.load_state_dict(state)
        self.inference = bn == "eval"
        if bn == "frozen":
            freeze_batchnorm(torch, model)
        else:
            model.train(not self.inference)
        if channels_last:
            model.to(memory_format=torch.channels_last)
            x = x.contiguous(memory_format=torch.channels_last)
        self.torch, self.model, self.x, self.y = torch, model, x, y
        self.forward = torch.compile(model) if compiled else model
        self.amp = torch.bfloat16 if dtype == "bf16" else None
        params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.SGD(params, lr=LR, momentum=MOMENTUM)
        self.graph: Any = None
        self.loss: Any = None
        self.logits: Any = None  # inference's output

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.amp is None:
            return contextlib.nullcontext()
        # cache_enabled=False: autocast's cast cache must not outlive a graph capture (PyTorch's CUDA-graph notes)
        return self.torch.autocast(device_type=self.x.device.type, dtype=self.amp, cache_enabled=False)

    def step(self) -> None:
        """One training step (or inference), eagerly."""
        if self.inference:
            with self.torch.no_grad(), self.autocast():
                self.logits = self.forward(self.x)
            return
        self.optimizer.zero_grad(set_to_none=True)
        with self.autocast():
            loss = self.torch.nn.functional.cross_entropy(self.forward(self.x), self.y)
        loss.backward()
        self.optimizer.step()
        self.loss = loss.detach()

    def run(self) -> None:
        """The step: the graph's replay once captured."""
        if self.graph is None:
            self.step()
        else:
            self.graph.replay()

    def warm_up(self, steps: int) -> None:
        for _ in range(steps):
            self.step()

    def capture(self, warmup: int, stream: Any = None) -> None:
        """Warm-up on a side stream, then the whole step captured into a graph (grads set to None first, so backward
        allocates them from the graph's pool and each replay rewrites them)."""
        torch = self.torch
        if self.x.device.type != "cuda":
            raise RuntimeError("CUDA graphs need a CUDA device")
        stream = torch.cuda.Stream() if stream is None else stream
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            self.warm_up(max(warmup, GRAPH_WARMUP))
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        self.optimizer.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            self.step()
        self.graph = graph


# --- gradients -------------------------------------------------------------------------------------------------------
def grad_errors(reference: Mapping[str, Any], grads: Mapping[str, Any]) -> dict[str, float]:
    """Per parameter, the error of `grads` against float64's (`reference`, by name): ||g - g64|| / ||g64||, or over
    the norm of all of `reference` where ||g64|| is at most VANISHING of it. inf where only one side has a gradient or
    anything is not finite; parameters without a gradient on either side are left out."""
    if set(reference) != set(grads):
        only_reference, only_grads = sorted(set(reference) - set(grads)), sorted(set(grads) - set(reference))
        raise ValueError(f"the models' parameters differ: float64's only {only_reference[:3]}, the other's only "
                         f"{only_grads[:3]}")  # fmt: skip
    norms, total = _norms(reference)
    errors: dict[str, float] = {}
    for name, g64 in reference.items():
        g = grads[name]
        if g is None and g64 is None:
            continue
        if g is None or g64 is None:
            errors[name] = math.inf
            continue
        if tuple(g.shape) != tuple(g64.shape):
            raise ValueError(f"{name}: gradient shapes differ, float64 {tuple(g64.shape)}, other {tuple(g.shape)}")
        scale = total if norms[name] <= VANISHING * total else norms[name]
        difference = float((g.detach().double() - g64.detach().double()).norm())
        error = 0.0 if difference == 0.0 else difference / scale if scale > 0.0 else math.inf
        errors[name] = error if math.isfinite(error) else math.inf
    if not errors:
        raise ValueError("no parameter has a gradient")
    return errors


def _norms(reference: Mapping[str, Any]) -> tuple[dict[str, float], float]:
    """Each gradient's norm, and that of them all."""
    norms = {name: float(g.detach().double().norm()) for name, g in reference.items() if g is not None}
    return norms, math.sqrt(sum(n * n for n in norms.values()))


def vanishing(reference: Mapping[str, Any]) -> list[str]:
    """The parameters whose float64 gradient is at most VANISHING of the model's (see grad_errors)."""
    norms, total = _norms(reference)
    return [name for name, n in norms.items() if n <= VANISHING * total]


@dataclass(frozen=True)
class GradCheck:
    """Both sides' gradients (logits in inference) against float64's: each parameter's error per side, and how many
    parameters had no gradient in exact arithmetic."""

    torch: Mapping[str, float]
    ours: Mapping[str, float]
    vanishing: int = 0

    @property
    def worst_param(self) -> str:
        """The parameter of ours' worst error."""
        return max(self.ours, key=lambda name: self.ours[name])

    @property
    def worst(self) -> float:
        return self.ours[self.worst_param]

    @property
    def torch_worst(self) -> float:
        return max(self.torch.values())

    def ok(self, dtype: str) -> bool:
        """Ours' worst error at most GRAD_RATIO times torch's (taken as at least one rounding of `dtype`)."""
        return self.worst <= GRAD_RATIO * max(self.torch_worst, ROUNDING[dtype])


def check_grads(reference: Mapping[str, Any], theirs: Mapping[str, Any], ours: Mapping[str, Any]) -> GradCheck:
    """torch's (`theirs`) and ours' gradients against float64's (`reference`)."""
    return GradCheck(grad_errors(reference, theirs), grad_errors(reference, ours), len(vanishing(reference)))


# --- kernels from the profiler ---------------------------------------------------------------------------------------
def is_bn_kernel(name: str) -> bool:
    low = name.lower()
    return any(pattern in low for pattern in BN_PATTERNS)


def is_ours_kernel(name: str) -> bool:
    return OURS_PATTERN in name


def kernel_times(events: Iterable[Any], device_type: Any) -> dict[str, float]:
    """µs per name of the device's activities (kernels, memory copies and sets) among torch.profiler's events,
    leaving out GPU-side user annotations (ranges that would count their kernels twice)."""
    out: dict[str, float] = {}
    for event in events:
        if event.device_type != device_type or getattr(event, "is_user_annotation", False):
            continue
        out[event.name] = out.get(event.name, 0.0) + event.time_range.elapsed_us()
    return out


@dataclass(frozen=True)
class KernelTimes:
    """CUDA µs per kernel name over `steps` profiled steps of one side."""

    us: Mapping[str, float]
    steps: int

    @property
    def total_us(self) -> float:
        return sum(self.us.values())

    @property
    def bn_us(self) -> float:
        return sum(us for name, us in self.us.items() if is_bn_kernel(name))

    @property
    def bn_share(self) -> float | None:
        """BN kernels' share of the CUDA time; None where no kernel looks like BN (the patterns need a look)."""
        return self.bn_us / self.total_us if self.bn_us > 0 and self.total_us > 0 else None

    @property
    def bn_ms(self) -> float | None:
        """BN kernels' CUDA ms per step."""
        return self.bn_us / self.steps / 1e3 if self.bn_us > 0 else None

    @property
    def gpu_ms(self) -> float:
        """CUDA ms per step (kernels, copies, sets): below the step time by the GPU's idle gaps."""
        return self.total_us / self.steps / 1e3

    def top(self, n: int = TOP_KERNELS) -> list[tuple[str, float]]:
        return sorted(self.us.items(), key=lambda item: -item[1])[:n]

    def bn_names(self) -> list[str]:
        return sorted((name for name in self.us if is_bn_kernel(name)), key=lambda name: -self.us[name])


def profile_kernels(torch: Any, run: Callable[[], Any], steps: int) -> KernelTimes:
    """CUDA µs per kernel over `steps` calls of `run` (CPU activity recorded too: some setups record no kernel
    without it)."""
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(steps):
            run()
        torch.cuda.synchronize()
    us = kernel_times(prof.events(), torch.autograd.DeviceType.CUDA)
    if not us:
        raise RuntimeError("torch.profiler recorded no CUDA activity (CUPTI unavailable?)")
    return KernelTimes(us, steps)


# --- timing ----------------------------------------------------------------------------------------------------------
class HostEvent:
    """A CUDA event's interface on the host clock, for runs on the CPU (where every call is synchronous)."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.at = 0.0

    def record(self) -> None:
        self.at = self.clock()

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: HostEvent) -> float:
        return (end.at - self.at) * 1e3  # ms, as CUDA events


@dataclass
class StepTimes:
    """ms per step (event spans) and host ms per issued step, per side; why a side stopped, if it did."""

    gpu: dict[str, list[float]]
    host: dict[str, list[float]]
    errors: dict[str, str]

    def median(self, side: str) -> float | None:
        return statistics.median(self.gpu[side]) if self.gpu.get(side) and side not in self.errors else None

    def host_median(self, side: str) -> float | None:
        return statistics.median(self.host[side]) if self.host.get(side) and side not in self.errors else None


def time_steps(
    runs: Mapping[str, Callable[[], Any]],
    steps: int,
    block: int,
    event: Callable[[], Any],
    sync: Callable[[], None],
    clock: Callable[[], float] = time.perf_counter,
) -> StepTimes:
    """`steps` timed steps of each side, in blocks of `block` issued back to back (an event recorded between two
    steps), the sides alternating block by block, synchronised between blocks. A side that raises is dropped with
    its reason; the others go on."""
    out = StepTimes({name: [] for name in runs}, {name: [] for name in runs}, {})
    done = dict.fromkeys(runs, 0)
    active = dict(runs)
    while active:
        for name, run in list(active.items()):
            n = min(block, steps - done[name])
            marks = [event() for _ in range(n + 1)]
            sync()
            try:
                marks[0].record()
                for i in range(n):
                    start = clock()
                    run()
                    if i == 0:
                        out.host[name].append((clock() - start) * 1e3)
                    marks[i + 1].record()
                marks[-1].synchronize()
            except Exception as err:
                out.errors[name] = reason(err)
                del active[name]
                continue
            out.gpu[name] += [a.elapsed_time(b) for a, b in itertools.pairwise(marks)]
            done[name] += n
            if done[name] >= steps:
                del active[name]
    return out


# --- results ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cell:
    model: str
    batch: int
    dtype: str
    mode: str

    @property
    def group(self) -> tuple[str, int, str]:
        return (self.model, self.batch, self.dtype)

    def label(self) -> str:
        return f"{self.model} B={self.batch} {self.dtype} {self.mode}"


@dataclass
class ModelResult:
    """One cell: the median step ms and host ms per side, the gradient comparison, each side's profiled kernels (of
    its (model, batch, dtype)), why anything is n/a, the cell's wall time."""

    cell: Cell
    ms: dict[str, float | None] = field(default_factory=lambda: dict.fromkeys(SIDES))
    host_ms: dict[str, float | None] = field(default_factory=lambda: dict.fromkeys(SIDES))
    steps: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SIDES, 0))
    grads: GradCheck | None = None
    kernels: dict[str, KernelTimes | None] = field(default_factory=lambda: dict.fromkeys(SIDES))
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def speedup(self) -> float | None:
        """torch's step time over ours (> 1: ours is faster; issue target >= 1.0)."""
        return ratio(self.ms["torch"], self.ms["ours"])

    @property
    def grads_ok(self) -> bool | None:
        return None if self.grads is None else self.grads.ok(self.cell.dtype)

    def bn_share(self, side: str) -> float | None:
        k = self.kernels.get(side)
        return None if k is None else k.bn_share

    def bn_ms(self, side: str) -> float | None:
        k = self.kernels.get(side)
        return None if k is None else k.bn_ms

    def gpu_ms(self, side: str) -> float | None:
        k = self.kernels.get(side)
        return None if k is None else k.gpu_ms


def failed(cell: Cell, why: str) -> ModelResult:
    return ModelResult(cell, notes=[why])


# --- running ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Plan:
    models: Sequence[str] = MODELS
    batches: Sequence[int] = BATCHES
    dtypes: Sequence[str] = DTYPES
    modes: Sequence[str] = MODES
    steps: int = STEPS
    warmup: int = WARMUP
    profile_steps: int = PROFILE_STEPS
    block: int = BLOCK
    image: int = IMAGE
    classes: int = CLASSES
    calibration: tuple[int, int] = CALIBRATION
    budget_s: float = 0.0  # no limit
    bn: str = "frozen"  # or "train", "eval" (BN_MODES)
    memory_format: str = "contiguous"  # or "channels_last" (MEMORY_FORMATS)
    fuse: bool = False  # ours: convert(model, fuse=True): BN + ReLU/SiLU/ReLU6/Hardswish and BN + add + ReLU fused

    def cells(self) -> list[Cell]:
        return [
            Cell(model, batch, dtype, mode)
            for model in self.models
            for batch in self.batches
            for dtype in self.dtypes
            for mode in self.modes
        ]

    def groups(self) -> list[tuple[str, int, str]]:
        return list(dict.fromkeys(cell.group for cell in self.cells()))


Build = Callable[[Any, str, int], Any]  # build(torch, name, classes) -> an nn.Module with fresh weights
Convert = Callable[[Any], Any]  # convert(model) -> the model with its BatchNorm2d modules ours


# Models whose training-mode output is (logits, auxiliary logits) unless their auxiliary heads are left out.
AUXILIARY_HEADS = ("inception_v3", "googlenet")


def torchvision_model(torch: Any, name: str, classes: int) -> Any:
    """A torchvision classification model with fresh weights (weights=None: nothing is downloaded), without the
    auxiliary heads of AUXILIARY_HEADS (the step's loss is on the logits alone)."""
    import torchvision

    extra = {"aux_logits": False} if name in AUXILIARY_HEADS else {}
    return torchvision.models.get_model(name, weights=None, num_classes=classes, **extra)


def unavailable() -> str | None:
    """Why the model benchmark cannot run here (torchvision missing), or None."""
    try:
        importlib.import_module("torchvision")
    except ImportError as err:
        return f"torchvision is not installed ({err}); it provides the models"
    return None


def load_convert() -> tuple[Convert | None, str | None]:
    """rust_kernels.torch.convert, or None and why it cannot be had."""
    try:
        module = importlib.import_module("rust_kernels.torch")
        return module.convert, None
    except Exception as err:
        return None, f"rust_kernels.torch.convert is not available: {reason(err)}"


def converted(torch: Any, base: Any, convert: Convert) -> tuple[Any, str | None]:
    """A deep copy of `base` through `convert`, and a note if any BatchNorm2d stayed torch's."""
    model = copy.deepcopy(base)
    result = convert(model)
    model = model if result is None else result
    norms = [m for m in batch_norms(torch, model) if isinstance(m, torch.nn.BatchNorm2d)]
    plain = [m for m in norms if type(m) is torch.nn.BatchNorm2d]
    note = f"ours: convert left {len(plain)} of {len(norms)} BatchNorm2d as torch's" if plain else None
    return model, note


class Runner:
    """Runs a plan: builds each model once, then each (model, batch, dtype) and its modes, then the profiles."""

    def __init__(
        self,
        torch: Any,
        plan: Plan,
        convert: Convert | None = None,
        device: Any = None,
        build: Build = torchvision_model,
        out: TextIO | None = None,
    ) -> None:
        self.torch, self.plan, self.build, self.out = torch, plan, build, out
        self.device = torch.device("cuda" if device is None else device)
        self.cuda = self.device.type == "cuda"
        if convert is None:
            self.convert, self.convert_error = load_convert()
        else:
            self.convert, self.convert_error = convert, None
        if plan.fuse and self.convert is not None:
            self.convert = functools.partial(self.convert, fuse=True)
        self.bases: dict[str, tuple[Any, dict[str, Any]]] = {}  # model name -> (built model, its state)
        self.progress: Progress | None = None
        self.deadline = time.perf_counter() + plan.budget_s if plan.budget_s > 0 else math.inf

    # -- helpers
    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def event(self) -> Any:
        return self.torch.cuda.Event(enable_timing=True) if self.cuda else HostEvent()

    def release(self) -> None:
        gc.collect()
        if self.cuda:
            self.torch.cuda.empty_cache()

    def say(self, text: str) -> None:
        """A line on stdout (and the log), the progress line cleared first on a terminal."""
        progress = self.progress
        if progress is not None and progress.tty:
            progress.stream.write("\r" + " " * 118 + "\r")
            progress.stream.flush()
        print(text, file=report._out(self.out), flush=True)

    def advance(self, item: str) -> None:
        if self.progress is not None:
            self.progress.advance(item)

    def over_budget(self) -> str | None:
        """Why nothing more may begin, or None."""
        if time.perf_counter() < self.deadline:
            return None
        return f"skipped: the run is over its time budget of {self.plan.budget_s:.0f} s (--budget)"

    def skip(self, cells: Sequence[Cell], why: str) -> list[ModelResult]:
        for cell in cells:
            self.advance(cell.label())
            self.say(f"{cell.label()}: n/a: {why}")
        return [failed(cell, why) for cell in cells]

    # -- the run
    def run(self) -> list[ModelResult]:
        plan = self.plan
        total = len(plan.cells()) + (len(plan.groups()) if plan.profile_steps and self.cuda else 0)
        results: list[ModelResult] = []
        try:
            versions = f"torchvision {importlib.import_module('torchvision').__version__}"
        except Exception as err:
            versions = f"torchvision not importable ({reason(err)})"
        self.say(f"models: {versions}; device {self.device}")
        with Progress("models", total) as self.progress:
            if self.convert_error:
                self.say(f"ours n/a in every cell: {self.convert_error}")
            for name in plan.models:
                results += self.run_model(name)
            if plan.profile_steps and self.cuda:
                self.run_profiles(results)
            elif plan.profile_steps:
                for r in results:
                    r.notes.append("BN share n/a: the profile needs a CUDA device")
        self.progress = None
        self.bases.clear()
        self.release()
        return results

    def base(self, name: str) -> tuple[Any, dict[str, Any]]:
        """The model built once (seeded), on the device, its BN statistics calibrated, and its state to reset to."""
        if name not in self.bases:
            torch = self.torch
            torch.manual_seed(SEED)
            model = self.build(torch, name, self.plan.classes).to(self.device)
            calibrate(torch, model, self.device, *self.plan.calibration, self.plan.image)
            state = {key: value.detach().clone() for key, value in model.state_dict().items()}
            self.bases[name] = (model, state)
        return self.bases[name]

    def run_model(self, name: str) -> list[ModelResult]:
        cells = [c for c in self.plan.cells() if c.model == name]
        late = self.over_budget()
        if late:
            return self.skip(cells, late)
        try:
            self.base(name)
        except Exception as err:
            self.release()
            return self.skip(cells, f"model: {reason(err)}")
        results = []
        for batch in self.plan.batches:
            for dtype in self.plan.dtypes:
                results += self.run_group(name, batch, dtype)
        return results

    def models(self, name: str) -> tuple[dict[str, Any], list[str]]:
        """torch's model (a deep copy of the base) and ours (a deep copy converted), and notes on what failed."""
        base, _ = self.base(name)
        models = {"torch": copy.deepcopy(base)}
        notes = []
        if self.convert is None:
            notes.append(f"ours: {self.convert_error}")
        else:
            try:
                models["ours"], note = converted(self.torch, base, self.convert)
                notes += [note] if note else []
            except Exception as err:
                notes.append(f"ours: convert: {reason(err)}")
        return models, notes

    def run_group(self, name: str, batch: int, dtype: str) -> list[ModelResult]:
        cells = [Cell(name, batch, dtype, mode) for mode in self.plan.modes]
        late = self.over_budget()
        if late:
            return self.skip(cells, late)
        try:
            x, y = make_inputs(self.torch, self.device, batch, self.plan.image, self.plan.classes)
            models, notes = self.models(name)
        except Exception as err:
            self.release()
            return self.skip(cells, f"setup: {reason(err)}")
        results = []
        for cell in cells:
            late = self.over_budget()
            if late:
                results += self.skip([cell], late)
                continue
            self.advance(cell.label())
            result = self.run_cell(cell, models, x, y, notes)
            self.say(cell_line(result))
            results.append(result)
        del models, x, y
        self.release()
        return results

    def run_cell(self, cell: Cell, models: Mapping[str, Any], x: Any, y: Any, notes: Sequence[str]) -> ModelResult:
        started = time.perf_counter()
        result = ModelResult(cell, notes=list(notes))
        try:
            self.measure(cell, models, x, y, result)
        except Exception as err:
            result.notes.append(f"cell: {reason(err)}")
        finally:
            for model in models.values():
                model.zero_grad(set_to_none=True)  # the graph's gradients, so its pool can go
            self.release()
        result.seconds = time.perf_counter() - started
        return result

    def prepare(self, cell: Cell, model: Any, x: Any, y: Any, stream: Any) -> Side:
        """A side of the cell, warmed up (and captured, in graph mode)."""
        plan = self.plan
        side = Side(self.torch, model, self.base(cell.model)[1], x, y, cell.dtype, plan.bn,
                    plan.memory_format == "channels_last", cell.mode == "compile")  # fmt: skip
        if cell.mode == "graph":
            side.capture(self.plan.warmup, stream)
        else:
            side.warm_up(self.plan.warmup)
        return side

    def measure(self, cell: Cell, models: Mapping[str, Any], x: Any, y: Any, result: ModelResult) -> None:
        """Fills `result`: each side prepared, the gradients compared, the steps timed. Every Side (and graph) lives
        in this frame only, so all is freed when it returns."""
        sides: dict[str, Side] = {}
        stream = self.torch.cuda.Stream() if cell.mode == "graph" and self.cuda else None
        for name, model in models.items():
            try:
                sides[name] = self.prepare(cell, model, x, y, stream)
            except Exception as err:
                result.notes.append(f"{name}: {reason(err)}")
                model.zero_grad(set_to_none=True)
            if self.cuda:
                self.torch.cuda.empty_cache()  # the warm-up's blocks, before the other side's
        if "torch" in sides and "ours" in sides:
            try:
                result.grads = self.step_and_compare(sides["torch"], sides["ours"])
            except Exception as err:
                result.notes.append(f"gradients: {reason(err)}")
        if sides:
            runs = {name: side.run for name, side in sides.items()}
            timed = time_steps(runs, self.plan.steps, self.plan.block, self.event, self.sync)
            for name in sides:
                result.ms[name] = timed.median(name)
                result.host_ms[name] = timed.host_median(name)
                result.steps[name] = len(timed.gpu[name])
            result.notes += [f"{name} timing: {why}" for name, why in timed.errors.items()]
        for name, side in sides.items():
            if self.plan.bn == "train":
                break  # training BN updates its running statistics by design
            changed = changed_statistics(self.torch, side.model, self.base(cell.model)[1])
            if changed:
                result.notes.append(f"{name}: BN running statistics changed during the steps: {changed[:3]}")

    def step_and_compare(self, reference: Side, ours: Side) -> GradCheck:
        """Ours gets torch's weights; each side and a float64 copy of torch's model run one step eagerly on the same
        inputs, dropout and stochastic depth dropping nothing (float64 would draw other masks); both sides' gradients
        (logits in inference) are compared with float64's."""
        torch = self.torch
        copy_weights(torch, reference.model, ours.model)
        exact = copy.deepcopy(reference.model).double()
        with dropping_nothing(torch, reference.model, ours.model, exact):
            if reference.inference:
                with torch.no_grad():
                    want = {"logits": exact(reference.x.double())}
            else:
                exact.zero_grad(set_to_none=True)
                torch.nn.functional.cross_entropy(exact(reference.x.double()), reference.y).backward()
                want = named_grads(exact)
            got = {}
            for name, side in (("torch", reference), ("ours", ours)):
                side.step()
                got[name] = {"logits": side.logits} if side.inference else named_grads(side.model)
        self.sync()
        return check_grads(want, got["torch"], got["ours"])

    def run_profiles(self, results: list[ModelResult]) -> None:
        """Per (model, batch, dtype): each side's eager steps under torch.profiler, on every mode's row."""
        for model, batch, dtype in self.plan.groups():
            rows = [r for r in results if r.cell.group == (model, batch, dtype)]
            self.advance(f"{model} B={batch} {dtype} profile")
            if model not in self.bases or all(r.ms == dict.fromkeys(SIDES) for r in rows):
                continue  # it did not build, or nothing of it ran: its rows say why
            late = self.over_budget()
            if late:
                for r in rows:
                    r.notes.append(f"BN share n/a: {late}")
                continue
            kernels: dict[str, KernelTimes | None] = dict.fromkeys(SIDES)
            notes = []
            try:
                x, y = make_inputs(self.torch, self.device, batch, self.plan.image, self.plan.classes)
                models, _ = self.models(model)
                for name, m in models.items():
                    try:
                        kernels[name] = self.profile(m, self.bases[model][1], x, y, dtype)
                    except Exception as err:
                        notes.append(f"{name} profile: {reason(err)}")
                    finally:
                        m.zero_grad(set_to_none=True)
                        self.release()
                del models, x, y
            except Exception as err:
                notes.append(f"profile: {reason(err)}")
            for r in rows:
                r.kernels = dict(kernels)
                r.notes += notes
            self.release()

    def profile(self, model: Any, state: Mapping[str, Any], x: Any, y: Any, dtype: str) -> KernelTimes:
        side = Side(self.torch, model, state, x, y, dtype, self.plan.bn, self.plan.memory_format == "channels_last")
        side.warm_up(2)
        return profile_kernels(self.torch, side.step, self.plan.profile_steps)


def run(
    torch: Any,
    plan: Plan,
    convert: Convert | None = None,
    device: Any = None,
    build: Build = torchvision_model,
    out: TextIO | None = None,
) -> list[ModelResult]:
    """Every cell of `plan` (see the module's doc); `convert` defaults to rust_kernels.torch.convert, `device` to
    CUDA, `build` to torchvision."""
    return Runner(torch, plan, convert, device, build, out).run()


# --- reports ---------------------------------------------------------------------------------------------------------
def ms(value: float | None) -> str:
    return fmt(value, ".2f")


def share(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def sci(value: float | None) -> str:
    return fmt(value, ".2e")


def grad_ratio(g: GradCheck) -> str:
    """Ours' worst gradient error over torch's."""
    return "inf" if g.torch_worst == 0.0 and g.worst > 0.0 else f"{g.worst / g.torch_worst if g.worst else 0.0:.2f}"


def cell_line(r: ModelResult) -> str:
    """The line printed as a cell ends."""
    text = f"{r.cell.label()}: torch {ms(r.ms['torch'])} ms, ours {ms(r.ms['ours'])} ms, {times(r.speedup)}"
    if r.grads is not None:
        g = r.grads
        text += f"; grads vs float64: torch {sci(g.torch_worst)}, ours {sci(g.worst)} ({g.worst_param})"
    text += f"; {r.seconds:.1f} s"
    return text + "".join(f"\n  n/a: {note}" for note in r.notes)


MODEL_FIELDS = ["model", "batch", "dtype", "mode", "torch_ms", "ours_ms", "speedup_vs_torch"]
MODEL_FIELDS += ["torch_host_ms", "ours_host_ms", "torch_steps", "ours_steps"]
MODEL_FIELDS += ["grad_err_torch", "grad_err_ours", "grad_worst_param", "grad_params", "grad_vanishing"]
MODEL_FIELDS += ["grad_within_target"]
MODEL_FIELDS += ["bn_share_torch", "bn_ms_torch", "gpu_ms_torch", "bn_share_ours", "bn_ms_ours", "gpu_ms_ours"]
MODEL_FIELDS += ["seconds", "note"]
KERNEL_FIELDS = ["model", "batch", "dtype", "side", "kernel", "us_per_step", "bn", "ours"]


def csv_row(r: ModelResult) -> dict[str, str]:
    c = r.cell
    row = {"model": c.model, "batch": str(c.batch), "dtype": c.dtype, "mode": c.mode}
    row |= {"torch_ms": fmt(r.ms["torch"], ".3f"), "ours_ms": fmt(r.ms["ours"], ".3f")}
    row |= {"speedup_vs_torch": fmt(r.speedup, ".4f")}
    row |= {f"{s}_host_ms": fmt(r.host_ms[s], ".3f") for s in SIDES} | {f"{s}_steps": str(r.steps[s]) for s in SIDES}
    g = r.grads
    row |= {
        "grad_err_torch": "n/a" if g is None else f"{g.torch_worst:.3e}",
        "grad_err_ours": "n/a" if g is None else f"{g.worst:.3e}",
        "grad_worst_param": "" if g is None else g.worst_param,
        "grad_params": "" if g is None else str(len(g.ours)),
        "grad_vanishing": "" if g is None else str(g.vanishing),
        "grad_within_target": "" if r.grads_ok is None else ("yes" if r.grads_ok else "no"),
    }
    for s in SIDES:
        row |= {f"bn_share_{s}": fmt(r.bn_share(s), ".4f"), f"bn_ms_{s}": fmt(r.bn_ms(s), ".3f")}
        row |= {f"gpu_ms_{s}": fmt(r.gpu_ms(s), ".3f")}
    return row | {"seconds": f"{r.seconds:.1f}", "note": "; ".join(r.notes)}


def kernel_rows(results: Sequence[ModelResult]) -> list[dict[str, str]]:
    """Every profiled kernel per (model, batch, dtype) and side, once (the modes' rows share the profile)."""
    rows, seen = [], set()
    for r in results:
        for side in SIDES:
            k = r.kernels.get(side)
            key = (r.cell.group, side)
            if k is None or key in seen:
                continue
            seen.add(key)
            for name, us in sorted(k.us.items(), key=lambda item: -item[1]):
                values = (r.cell.model, str(r.cell.batch), r.cell.dtype, side, name, f"{us / k.steps:.3f}")
                flags = ("yes" if is_bn_kernel(name) else "no", "yes" if is_ours_kernel(name) else "no")
                rows.append(dict(zip(KERNEL_FIELDS, (*values, *flags), strict=True)))
    return rows


def write_csv(results: Sequence[ModelResult], path: Path) -> None:
    report.write_dicts(path, MODEL_FIELDS, map(csv_row, results))


def write_kernels_csv(results: Sequence[ModelResult], path: Path) -> None:
    report.write_dicts(path, KERNEL_FIELDS, kernel_rows(results))


TABLE_HEAD = [("model", 13), ("B", 4), ("dtype", 5), ("mode", 5), ("torch ms", 9), ("ours ms", 9), ("vs torch", 8)]
TABLE_HEAD += [("host t ms", 9), ("host o ms", 9), ("grad o/t", 8), ("BN% torch", 9), ("BN ms t", 8)]
TABLE_HEAD += [("BN ms o", 8), ("s", 6)]


def table_cells(r: ModelResult) -> list[str]:
    c = r.cell
    cells = [c.model, str(c.batch), c.dtype, c.mode, ms(r.ms["torch"]), ms(r.ms["ours"]), times(r.speedup)]
    cells += [ms(r.host_ms["torch"]), ms(r.host_ms["ours"]), "n/a" if r.grads is None else grad_ratio(r.grads)]
    cells += [share(r.bn_share("torch")), fmt(r.bn_ms("torch"), ".2f"), fmt(r.bn_ms("ours"), ".2f")]
    return [*cells, f"{r.seconds:.0f}"]


def print_table(results: Sequence[ModelResult], out: TextIO | None = None) -> None:
    out = report._out(out)
    print(
        "models: training step (BN frozen or training) or inference, as the run says, median ms per step (CUDA"
        " events), ours vs torch = torch ms / ours ms; host = ms to issue a step; grad o/t = ours' worst gradient"
        " error against float64 over torch's (inference: the logits'; target <= GRAD_RATIO); BN% and"
        " BN ms = BN kernels' share of the step's CUDA time and their ms per step (torch.profiler, eager steps)",
        file=out,
    )
    report._table(TABLE_HEAD, (table_cells(r) for r in results), out)
    for r in results:
        for note in r.notes:
            print(f"  n/a in {r.cell.label()}: {note}", file=out)


def summary_lines(results: Sequence[ModelResult]) -> list[str]:
    timed = [r for r in results if r.speedup is not None]
    below = [r for r in timed if r.speedup is not None and r.speedup < SPEEDUP_TARGET]
    lines = [f"ours vs torch >= {SPEEDUP_TARGET:.2f}x in {len(timed) - len(below)} of {len(results)} cells"]
    lines[0] += f" ({len(results) - len(timed)} n/a)" if len(timed) < len(results) else ""
    lines += [f"  below: {r.cell.label()} {times(r.speedup)}" for r in below]
    checked = [r for r in results if r.grads is not None]
    line = f"gradients against float64, ours' worst error within {GRAD_RATIO:g}x torch's: "
    lines.append(line + f"{sum(bool(r.grads_ok) for r in checked)} of {len(checked)} cells compared"
                 + (f" ({len(results) - len(checked)} n/a)" if len(checked) < len(results) else ""))  # fmt: skip
    lines += [f"  over: {r.cell.label()} ours {sci(r.grads.worst)} ({r.grads.worst_param}), torch "
              f"{sci(r.grads.torch_worst)}" for r in checked if r.grads is not None and not r.grads_ok]  # fmt: skip
    return lines


def print_summary(results: Sequence[ModelResult], out: TextIO | None = None) -> None:
    out = report._out(out)
    for line in summary_lines(results):
        print(line, file=out)


def print_kernels(results: Sequence[ModelResult], top: int = TOP_KERNELS, out: TextIO | None = None) -> None:
    """For the first profiled (model, batch, dtype) of each (model, dtype) and side: the top kernels by CUDA time,
    flagged [BN] where they count as batch norm and [ours] where they are ours; then every name counted as BN over the
    whole run, so the matching can be checked both ways."""
    out = report._out(out)
    shown: set[tuple[str, str, str]] = set()
    matched: dict[str, dict[str, float]] = {side: {} for side in SIDES}
    for r in results:
        for side in SIDES:
            k = r.kernels.get(side)
            if k is None:
                continue
            for name in k.bn_names():
                matched[side][name] = matched[side].get(name, 0.0) + k.us[name] / k.steps
            key = (r.cell.model, r.cell.dtype, side)
            if key in shown:
                continue
            shown.add(key)
            print(f"top kernels, {side}, {r.cell.model} B={r.cell.batch} {r.cell.dtype} (µs per step):", file=out)
            for name, us in k.top(top):
                flags = ("[BN]" if is_bn_kernel(name) else "") + ("[ours]" if is_ours_kernel(name) else "")
                print(f"  {us / k.steps:10.1f} {flags:<10} {name[:SHOWN_NAME]}", file=out)
    for side in SIDES:
        if matched[side]:
            print(f"kernels counted as BN, {side} (µs per step, summed over the profiled cases):", file=out)
            for name, us in sorted(matched[side].items(), key=lambda item: -item[1]):
                print(f"  {us:10.1f} {name[:SHOWN_NAME]}", file=out)
