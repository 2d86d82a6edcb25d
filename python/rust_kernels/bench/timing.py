"""Timers: GPU time of one call (CUDA events, L2 flushed, the GPU kept busy ahead of the call) and host time per
call of a callable or a loop (perf_counter, synchronised only at the ends of rounds).

PyTorch is passed in (`torch`), never imported here, so the logic runs on the CPU against a stand-in in the tests.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any

WARMUP = 3  # calls before timing: module loading, autotuning and any JIT stay outside the timed region
FLUSH_BYTES = 256 * 2**20  # over 4x the H200's 60 MB L2
SLEEP_US = 100.0  # the least GPU spin queued ahead of a timed call
CALIBRATION_CYCLES = 1_000_000
ROUNDS = 5
INTERLEAVED_ROUNDS = 9

Loop = Callable[[int], None]  # loop(n) does something n times
Clock = Callable[[], float]  # seconds


def _nothing() -> None:
    pass


def repeat(call: Callable[[], Any]) -> Loop:
    """A loop that calls `call` n times, back to back."""

    def loop(n: int) -> None:
        for _ in range(n):
            call()

    return loop


def host_rounds(
    loop: Loop,
    n: int,
    rounds: int,
    begin: Callable[[], None] = _nothing,
    end: Callable[[], None] = _nothing,
    clock: Clock = time.perf_counter,
) -> list[float]:
    """Host µs per iteration of `loop(n)`, one figure per round. `begin` runs before and `end` after each round,
    both outside the timed span (e.g. synchronise and record events): nothing synchronises inside the loop."""
    if n < 1 or rounds < 1:
        raise ValueError(f"need n >= 1 and rounds >= 1, got n={n}, rounds={rounds}")
    out = []
    for _ in range(rounds):
        begin()
        start = clock()
        loop(n)
        out.append((clock() - start) * 1e6 / n)
        end()
    return out


def host_us_interleaved(
    calls: Mapping[str, Callable[[], Any]],
    per_round: int,
    rounds: int = INTERLEAVED_ROUNDS,
    sync: Callable[[], None] = _nothing,
    clock: Clock = time.perf_counter,
) -> dict[str, float]:
    """Host µs per call of each of `calls` (already warm), the median over `rounds`; each round times every call in
    turn, `per_round` times back to back with `sync` after each, so the slow spells of a noisy machine fall on all
    of them alike and their ratios hold."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    sync()
    for _ in range(rounds):
        for name, call in calls.items():
            times[name] += host_rounds(repeat(call), per_round, 1, end=sync, clock=clock)
    return {name: statistics.median(values) for name, values in times.items()}


def host_and_gpu_us(torch: Any, loop: Loop, n: int, rounds: int = ROUNDS) -> tuple[float, float]:
    """Median over rounds of (host µs, GPU µs) per iteration of `loop(n)`, on the current stream. The GPU figure is
    the span between events recorded around each round, divided by n."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    loop(min(n, 1000))  # settle caches and allocations before the first round
    gpu: list[float] = []

    def begin() -> None:
        torch.cuda.synchronize()
        start.record()

    def end() -> None:
        stop.record()
        stop.synchronize()
        gpu.append(start.elapsed_time(stop) * 1e3 / n)

    host = host_rounds(loop, n, rounds, begin, end)
    return statistics.median(host), statistics.median(gpu)


class GpuTimer:
    """Times single calls with CUDA events: each repetition flushes L2 (FLUSH_BYTES written), then queues a GPU spin
    (`torch.cuda._sleep`) longer than the call's host time, so the span between the two events holds GPU work only."""

    def __init__(self, torch: Any, reps: int, warmup: int = WARMUP) -> None:
        self.torch = torch
        self.reps = reps
        self.warmup = warmup
        self.flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)
        self.cycles_per_us = self._calibrate()

    def _elapsed_us(self) -> float:
        self.end.synchronize()
        return self.start.elapsed_time(self.end) * 1e3

    def _calibrate(self) -> float:
        """Clock cycles of `torch.cuda._sleep` per µs, measured once (the first spin only fills the queue)."""
        self.torch.cuda._sleep(CALIBRATION_CYCLES)
        self.start.record()
        self.torch.cuda._sleep(CALIBRATION_CYCLES)
        self.end.record()
        return CALIBRATION_CYCLES / self._elapsed_us()

    def spin_cycles(self, call: Callable[[], Any]) -> int:
        """Cycles of spin to queue ahead of `call`: it must outlast enqueueing the start event and the call, or host
        time leaks into the measurement; twice the call's host time, and at least SLEEP_US."""
        (host,) = host_rounds(repeat(call), 1, 1, begin=self.torch.cuda.synchronize)
        return int(max(SLEEP_US, 2 * host) * self.cycles_per_us)

    def median_us(self, call: Callable[[], Any]) -> float:
        """Median GPU µs of `call` over the repetitions, after `warmup` untimed calls."""
        return self.medians_us({"call": call})["call"]

    def medians_us(self, calls: Mapping[str, Callable[[], Any]]) -> dict[str, float]:
        """Median GPU µs of each call over the repetitions, after `warmup` untimed calls of each. Interleaved: each
        repetition times every call in turn, so that the GPU's state changing during a measurement falls on all of
        them alike. Timed one after another they differed by up to 12% through where they came: on an H100 a copy
        and a row kernel both took 24 µs after torch.compile's softmax had run and 27 µs before it
        (docs/results/h100-2026-12-06-copy-bound/)."""
        for call in calls.values():
            for _ in range(self.warmup):
                call()
        spins = {name: self.spin_cycles(call) for name, call in calls.items()}
        times: dict[str, list[float]] = {name: [] for name in calls}
        for _ in range(self.reps):
            for name, call in calls.items():
                self.flush.zero_()
                self.torch.cuda._sleep(spins[name])
                self.start.record()
                call()
                self.end.record()
                times[name].append(self._elapsed_us())
        return {name: statistics.median(t) for name, t in times.items()}
