"""The autotuner: plans measured on the device, not guessed.

An op that lists candidate plans (`Op.candidates`) has its plan chosen here on a CUDA call whose signature is not yet
decided (later calls of that signature replay the decision in the fast path, at dictionary cost). A *key* is what
the timings depend on: the problem's shape, dtype key, memory order, the arrays' alignment, and the GPU (name, SM
count). A candidate's *entry* is its time for a key, named by a hash of the key, the plan (its label: kernels,
constants, grid values) and its kernels' source keys (builder.source_key), so a changed kernel is timed afresh and
adding a candidate times only it. Entries live one per file under `<cache dir>/tuning/<GPU>/` (atomic writes, safe
under concurrent processes) and, read-only, in the tables the package ships (`tables/<GPU>.json`, measured with
`python -m rust_kernels tune`). The fastest candidate with an entry wins; candidates that fail or are refused get
an entry without a time and are never chosen (one whose kernel this machine cannot build or find, KernelUnavailable,
only for this process: it is tried again once the kernel is there).

Timing: CUDA events around each candidate's launches, the L2 cache flushed before each repetition, repetitions
interleaved across the candidates, the median kept; on scratch outputs and scratch copies of mutated inputs (the
running statistics are not updated by tuning). Each repetition (every candidate's flush, start event, launches and
end event) is captured into one CUDA graph and launched once, so the GPU runs it back to back: issued one by one from
Python, the GPU waits for the host between a plan's launches and that idle time is timed too (on the H200 a
channels_last forward whose two kernels take 10 µs, preparing each launch on this rehearsal path 56 µs of host time:
84 µs timed so). The legacy default stream (PyTorch's unless a stream is set) cannot be captured, so a call there is
timed on a stream the tuner owns: a blocking one, ordered with the legacy stream's work both ways as the call's own
launches are. Where a repetition still cannot be captured it is issued as it is (`issued_directly` counts them: their
times hold host time). At most TUNE_BUDGET_S per key.
Never inside CUDA-graph capture (the table's winner, else the heuristic plan), never in the emulator.
RUST_KERNELS_TUNING (config) turns it off (the heuristic plan), on (default) or force (every candidate re-timed once
per process). With it on, a key the shipped table serves is never timed: candidates of kernels added since the table
was measured (none of its plans holds them) are left out there until a table holding them ships, and timed
wherever the process times anyway (`newer_than_table`).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import statistics
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache, partial
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rust_kernels import cache as kcache
from rust_kernels import config, driver, progress
from rust_kernels.driver import capturing
from rust_kernels.errors import KernelUnavailable

if TYPE_CHECKING:  # the runtime imports this module
    from rust_kernels.runtime import Placement, Plan, Problem

TUNE_BUDGET_S = 1.5  # device time per key, all candidates and repetitions together
MAX_REPS = 7
MIN_REPS = 3
_TABLES = "tables"
_UNAVAILABLE = f"{KernelUnavailable.__name__}:"  # how time_plans names a candidate whose kernel this machine lacks


@dataclass(frozen=True)
class Gpu:
    name: str
    sms: int
    arch: str
    l2_bytes: int

    @property
    def slug(self) -> str:
        """A file name for the GPU: its name and SM count ("nvidia-h200-132sm")."""
        return re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-") + f"-{self.sms}sm"


@cache
def gpu(device: int) -> Gpu:
    from rust_kernels.cuda import device_arch

    drv = driver.driver_module()
    handle = driver.check(drv.cuDeviceGet(device), f"cuDeviceGet({device})")
    name = driver.check(drv.cuDeviceGetName(128, handle), "cuDeviceGetName")
    attr = drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE
    l2 = int(driver.check(drv.cuDeviceGetAttribute(attr, handle), "L2 cache size"))
    text = name.split(b"\0", 1)[0].decode() if isinstance(name, bytes) else str(name)
    return Gpu(text, driver.multiprocessor_count(device), device_arch(device), l2)


def key(problem: Problem, placement: Placement, device: Gpu) -> str:
    """What a candidate's time depends on besides the plan, as canonical JSON."""
    order = None if problem.order is None else list(problem.order)
    return json.dumps([list(problem.shape), problem.dtype_key, order, placement.alignment, device.name, device.sms])


def entry_name(tuning_key: str, plan: Plan, arch: str, keys: dict[Any, str] | None = None) -> str:
    """The name of `plan`'s entry for `tuning_key`; `keys`: source keys by kernel, shared by the plans of one key
    (they hold a few kernels, each plan its own objects of them: rendered again per plan, naming a key's candidates
    took 0.1-0.15 s)."""
    from rust_kernels.builder import source_key

    keys = {} if keys is None else keys
    for launch in plan.launches:
        if launch.kernel not in keys:
            keys[launch.kernel] = source_key(launch.kernel, arch)
    sources = [keys[launch.kernel] for launch in plan.launches]
    return kcache.sha256(json.dumps([tuning_key, plan.label, sources]).encode())[:40]


# --- the entries ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    """A candidate's time for a key (None: it failed or was refused, `reason` says why)."""

    us: float | None
    plan: str
    key: str
    reason: str = ""

    def record(self) -> dict[str, Any]:
        return {"us": self.us, "plan": self.plan, "key": self.key, "reason": self.reason}


def directory(device: Gpu) -> Path:
    return kcache.cache_dir() / "tuning" / device.slug


def _path(device: Gpu, name: str) -> Path:
    return directory(device) / name[:2] / f"{name}.json"


@cache
def shipped(slug: str) -> dict[str, Entry]:
    """The package's table for a GPU, `tables/<slug>.json.gz` (or `.json`); empty where none ships."""
    folder = resources.files("rust_kernels") / _TABLES
    for name, load in ((f"{slug}.json.gz", gzip.decompress), (f"{slug}.json", bytes)):
        path = folder / name
        if path.is_file():
            table = json.loads(load(path.read_bytes()))
            return {entry: Entry(**record) for entry, record in table["entries"].items()}
    return {}


@cache
def table_kernels(slug: str) -> frozenset[str]:
    """The names of the kernels the shipped table for a GPU has timed in some plan (from its entries' plan labels,
    whose launches start with the kernel's id, `<name>__<dtype>__<consts>`); read once per process, where a key
    lacks entries (0.16 s for the H200 table's 219 597 entries on a 2-core CI machine, after 1 s loading it)."""
    return frozenset(launch.split(" ", 1)[0].split("__", 1)[0] for entry in shipped(slug).values()
                     for launch in entry.plan.split(" + "))  # fmt: skip


def newer_than_table(plans: Sequence[Plan], names: Sequence[str], device: Gpu) -> set[int]:
    """Where the shipped table serves a key but for candidates of kernels it has never timed (kernels added since it
    was measured): those candidates' indices, which a process following RUST_KERNELS_TUNING=on leaves out rather than
    timing them on a key the table serves (they are timed wherever the process times anyway: a key the table lacks,
    a GPU it does not cover, the tune command). Else none."""
    timed_kernels = table_kernels(device.slug)
    newer = {i for i, plan in enumerate(plans) if any(p.kernel.name not in timed_kernels for p in plan.launches)}
    table = shipped(device.slug)
    if not newer or len(newer) == len(plans) or any(names[i] not in table for i in range(len(plans)) if i not in newer):
        return set()
    return newer


_memory: dict[str, Entry] = {}  # this process's entries, by name (also what force re-timed)


def lookup(device: Gpu, name: str, fresh: bool) -> Entry | None:
    """The entry `name`: this process's, else the cache's, else the shipped table's (`fresh`: this process's only)."""
    if name in _memory or fresh:
        return _memory.get(name)
    path = _path(device, name)
    try:
        entry = Entry(**json.loads(path.read_text()))
    except FileNotFoundError:
        entry = shipped(device.slug).get(name)
    except (OSError, ValueError, TypeError):  # a damaged file is timed again (and rewritten)
        entry = None
    if entry is not None:
        _memory[name] = entry
    return entry


def store(device: Gpu, name: str, entry: Entry) -> None:
    """Keeps the entry for this process and, where the cache can be written, for later ones (a full or read-only
    disk costs the later processes a re-timing, never this call)."""
    _memory[name] = entry
    try:
        kcache.write_atomic(_path(device, name), json.dumps(entry.record()).encode())
    except OSError as err:
        progress.say(f"tuning entry not saved ({err.strerror}): {_path(device, name)}")


def entries(device: Gpu) -> dict[str, dict[str, Any]]:
    """Every entry in the cache for `device` (what `tune --export` ships)."""
    out = {}
    for path in sorted(directory(device).glob("*/*.json")):
        try:
            out[path.stem] = Entry(**json.loads(path.read_text())).record()
        except (OSError, ValueError, TypeError):
            continue
    return out


# --- choosing --------------------------------------------------------------------------------------------------------
Launcher = Callable[["Plan"], None]  # runs a plan's launches on a stream (scratch outputs)

# (key, candidate labels) -> the winner and the candidates' entry names, this process
_chosen: dict[tuple[str, tuple[str, ...]], tuple[Plan, list[str]]] = {}
_recorders: list[list[str]] = []  # the lists `recording` fills


@dataclass(frozen=True)
class Timed:
    """A key this process timed: the rule's plan (the first candidate) and the winner, with their times."""

    key: str
    rule: str
    rule_us: float | None
    winner: str
    best_us: float


timed: list[Timed] = []  # what `tune` reports
issued_directly = 0  # repetitions the driver would not capture (their times hold host time), this process


_mode: str | None = None  # set by `use` (the tune command), else RUST_KERNELS_TUNING


def mode() -> str:
    return _mode or config.settings().tuning


def use(setting: str | None) -> None:
    """This process tunes in mode `setting` (one of config.TUNING_MODES), whatever RUST_KERNELS_TUNING says, timing
    every candidate without an entry (the tune command: kernels newer than the shipped table included); None: as it
    says."""
    global _mode
    if setting is not None and setting not in config.TUNING_MODES:
        raise ValueError(f"tuning mode: expected one of {config.TUNING_MODES}, got {setting!r}")
    _mode = setting


def choose(candidates: Sequence[Plan], problem: Problem, placement: Placement, device: int, stream: int,
           launcher: Callable[[int], Launcher]) -> Plan | None:  # fmt: skip
    """The fastest of `candidates` (the first: the op's rule's plan) for this call on `stream`, timing those
    without an entry (`launcher(timing_stream)` makes the launch function, on scratch arrays); None where none can
    be chosen (no timings, and timing is not allowed here)."""
    setting = mode()
    if setting == "off" or not candidates:
        return None
    info = gpu(device)
    tuning_key = key(problem, placement, info)
    memo = (tuning_key, tuple(p.label for p in candidates))
    if memo in _chosen:
        chosen, names = _chosen[memo]
        _record(names)
        return chosen
    keys: dict[Any, str] = {}
    names = [entry_name(tuning_key, p, info.arch, keys) for p in candidates]
    _record(names)
    known = [lookup(info, n, fresh=setting == "force") for n in names]
    missing = [i for i, e in enumerate(known) if e is None]
    # the tune command (use) and force time the kernels newer than the shipped table too
    left_out = newer_than_table(candidates, names, info) if missing and _mode is None and setting == "on" else set()
    missing = [i for i in missing if i not in left_out]
    if missing and not capturing(stream) and not profiler():
        timing = _timing_stream(device, stream)
        with _timing_lock:
            results = time_plans([candidates[i] for i in missing], launcher(timing), timing, info)
        for i, (us, reason) in zip(missing, results, strict=True):
            known[i] = Entry(us, candidates[i].label, tuning_key, reason)
            if reason.startswith(_UNAVAILABLE):  # this process's only: the kernel may be built or carried later
                _memory[names[i]] = known[i]
            else:
                store(info, names[i], known[i])
    times = [(e.us, i) for i, e in enumerate(known) if e is not None and e.us is not None]
    if not times:
        return None
    best_us, best = min(times)
    winner = candidates[best]
    if not any(e is None for i, e in enumerate(known) if i not in left_out):  # the same choice for every later call
        _chosen[memo] = (winner, names)
        if missing:
            rule = known[0]  # None where the rule's plan was left out (newer than the table)
            timed.append(Timed(tuning_key, candidates[0].label, rule and rule.us, winner.label, best_us))
    return winner


# Set in a process a CUDA profiler injects into: Nsight Compute 2025.3 sets the last two (seen on the H200 machine);
# CUDA_INJECTION64_PATH is CUPTI's injection variable, which other tools set.
PROFILER_VARIABLES = (
    "CUDA_INJECTION64_PATH",
    "NV_COMPUTE_PROFILER_PERFWORKS_DIR",
    "NV_NSIGHT_INJECTION_TRANSPORT_TYPE",
)


def profiler() -> str | None:
    """The variable showing that a CUDA profiler watches this process, or None. Under one, kernels run serialised and
    instrumented (on the H200 6 us kernels timed 80-135 us under ncu), and their times, stored, would mislead every
    later process: candidates are not timed there."""
    return next((name for name in PROFILER_VARIABLES if os.environ.get(name)), None)


@contextmanager
def recording() -> Iterator[list[str]]:
    """The entry names of every candidate the calls inside consult (what `tune` keeps per case, to skip the case
    while they all have entries)."""
    names: list[str] = []
    _recorders.append(names)
    try:
        yield names
    finally:
        _recorders.remove(names)


def _record(names: list[str]) -> None:
    for recorder in _recorders:
        recorder.extend(names)


def served(device: Gpu, names: Sequence[str]) -> bool:
    """Whether every entry `names` has one, in this process, the cache or the shipped table (none: no)."""
    return bool(names) and all(lookup(device, name, fresh=False) is not None for name in names)


def forget() -> None:
    """Drops this process's entries, choices and record of timings (tests)."""
    global issued_directly
    _memory.clear()
    _chosen.clear()
    timed.clear()
    issued_directly = 0


# One key timed at a time in a process: threads tuning at once would share the tuner's stream (one capture at a
# time) and the GPU (each other's launches inside their timings).
_timing_lock = threading.Lock()
_LEGACY_STREAMS = (0, 1)  # the NULL stream and CU_STREAM_LEGACY: no graph captures them


def _timing_stream(device: int, stream: int) -> int:
    """`stream`, unless it is the legacy default stream: then the tuner's own blocking stream on `device`."""
    return _own_stream(device) if stream in _LEGACY_STREAMS else stream


@cache
def _own_stream(device: int) -> int:
    """A blocking stream (made in the current context, the device's, and kept for the process): the legacy stream
    waits for its work and it for the legacy stream's, so the call's inputs and the scratch arrays' allocations are
    ordered with its launches."""
    drv = driver.driver_module()
    made = driver.check(drv.cuStreamCreate(drv.CUstream_flags.CU_STREAM_DEFAULT), "cuStreamCreate")
    return int(made)


# --- timing ----------------------------------------------------------------------------------------------------------
def time_plans(plans: Sequence[Plan], launch: Launcher, stream: int, info: Gpu) -> list[tuple[float | None, str]]:
    """(median µs, "") per plan, or (None, why) where its warm-up launch raised."""
    drv = driver.driver_module()
    handle = drv.CUstream(stream)
    flush, flush_bytes = _flush_buffer(info)
    events = _Events(drv)
    graphs = _Graphs(drv, handle)
    try:
        out: list[tuple[float | None, str]] = [(None, "")] * len(plans)
        warm: dict[int, float] = {}
        for i, plan in enumerate(plans):  # a warm-up launch each: loads the module, and says what fails
            start, end = events.pair()
            try:
                events.record(start, handle)
                launch(plan)
                events.record(end, handle)
                driver.check(drv.cuEventSynchronize(end), "cuEventSynchronize")
            except Exception as err:  # a refused or failing candidate is dropped, with why
                out[i] = (None, f"{type(err).__name__}: {err}"[:500])
                continue
            warm[i] = events.elapsed_us(start, end)
        per_rep = sum(warm.values()) + len(warm) * flush_bytes / 2e6  # the flush at about 2 TB/s
        reps = max(MIN_REPS, min(MAX_REPS, int(TUNE_BUDGET_S * 1e6 / max(per_rep, 1.0))))
        samples: dict[int, list[tuple[Any, Any]]] = {i: [] for i in warm}

        def repetition(pairs: dict[int, tuple[Any, Any]], captured: bool) -> None:
            for i, (start, end) in pairs.items():  # interleaved: a drift of the clocks reaches every candidate alike
                driver.check(drv.cuMemsetD8Async(flush, 0, flush_bytes, handle), "cuMemsetD8Async")
                events.record(start, handle, captured)
                launch(plans[i])
                events.record(end, handle, captured)

        for _ in range(reps if warm else 0):
            pairs = {i: events.pair() for i in warm}
            # Captured after every warm-up: a warm-up may grow a workspace that an earlier candidate shares, and a
            # graph keeps the addresses it was captured with.
            graphs.run(partial(repetition, pairs))
            for i, pair in pairs.items():
                samples[i].append(pair)
        driver.check(drv.cuStreamSynchronize(handle), "cuStreamSynchronize")
        for i, pairs in samples.items():
            out[i] = (statistics.median(events.elapsed_us(s, e) for s, e in pairs), "")
        return out
    finally:
        graphs.destroy()
        events.destroy()


class _Events:
    def __init__(self, drv: Any) -> None:
        self.drv = drv
        self.made: list[Any] = []

    def pair(self) -> tuple[Any, Any]:
        pair = tuple(driver.check(self.drv.cuEventCreate(0), "cuEventCreate") for _ in range(2))  # default flags
        self.made += pair
        return pair  # type: ignore[return-value]

    def record(self, event: Any, stream: Any, captured: bool = False) -> None:
        """Records `event` on `stream`; `captured`: into the graph the stream is capturing, as a node of it."""
        if captured:
            flags = self.drv.CUevent_record_flags.CU_EVENT_RECORD_EXTERNAL
            driver.check(self.drv.cuEventRecordWithFlags(event, stream, flags), "cuEventRecordWithFlags")
        else:
            driver.check(self.drv.cuEventRecord(event, stream), "cuEventRecord")

    def elapsed_us(self, start: Any, end: Any) -> float:
        return float(driver.check(self.drv.cuEventElapsedTime(start, end), "cuEventElapsedTime")) * 1e3

    def destroy(self) -> None:
        for event in self.made:
            self.drv.cuEventDestroy(event)


class _Graphs:
    """Repetitions captured into CUDA graphs on the timing stream and launched, destroyed with it."""

    def __init__(self, drv: Any, stream: Any) -> None:
        self.drv, self.stream = drv, stream
        self.made: list[tuple[Any, Any]] = []

    def run(self, issue: Callable[[bool], None]) -> None:
        """`issue(True)` captured into a graph, which is launched; `issue(False)` issued directly where the driver
        or a launch refuses capture."""
        drv = self.drv
        mode = drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        if drv.cuStreamBeginCapture(self.stream, mode)[0] != drv.CUresult.CUDA_SUCCESS:
            self._directly(issue)
            return
        try:
            issue(True)
        except Exception:  # the capture is invalidated: ended below, then issued directly
            captured = False
        else:
            captured = True
        err, graph = drv.cuStreamEndCapture(self.stream)
        if err != drv.CUresult.CUDA_SUCCESS:
            self._directly(issue)
            return
        err, executable = drv.cuGraphInstantiate(graph, 0) if captured else (err, None)
        if not captured or err != drv.CUresult.CUDA_SUCCESS:
            drv.cuGraphDestroy(graph)
            self._directly(issue)
            return
        self.made.append((graph, executable))
        driver.check(drv.cuGraphLaunch(executable, self.stream), "cuGraphLaunch")

    @staticmethod
    def _directly(issue: Callable[[bool], None]) -> None:
        global issued_directly
        issued_directly += 1
        issue(False)

    def destroy(self) -> None:
        """Destroys the graphs once their launches are done."""
        if self.made:
            self.drv.cuStreamSynchronize(self.stream)
        for graph, executable in self.made:
            self.drv.cuGraphExecDestroy(executable)
            self.drv.cuGraphDestroy(graph)


@cache
def _flush_buffer(info: Gpu) -> tuple[Any, int]:
    """Device memory twice the L2's size, overwritten before each repetition so none starts with warm L2 lines (held
    for the process once it tunes)."""
    nbytes = max(2 * info.l2_bytes, 1 << 20)
    drv = driver.driver_module()
    return driver.check(drv.cuMemAlloc(nbytes), "cuMemAlloc"), nbytes
