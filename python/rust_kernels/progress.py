"""Progress on stderr for long work: `step` announces one long step (toolchain set-up, cargo, ptxas) and its
duration; `Progress` is one updating line for many items (builds, checks). RUST_KERNELS_QUIET=1 silences both."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import TextIO

from rust_kernels import config


def _quiet() -> bool:
    return config.settings().quiet


def say(message: str) -> None:
    if not _quiet():
        print(f"[rust_kernels] {message}", file=sys.stderr, flush=True)


_bars = 0  # Progress lines open: steps inside one stay silent, the bar tells


@contextmanager
def step(message: str) -> Iterator[None]:
    """Reports a long step and its duration in one line when it ends (silent under a Progress bar)."""
    start = time.perf_counter()
    yield
    if not _bars:
        say(f"{message}: {time.perf_counter() - start:.1f} s")


class Progress:
    """`[what] n/total (pct) elapsed item`, rewritten in place on a terminal; elsewhere (logs, CI) a line at every
    tenth of the work, so a log stays short."""

    def __init__(self, what: str, total: int, stream: TextIO | None = None) -> None:
        self.what, self.total, self.done = what, total, 0
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.start = time.perf_counter()
        self._next_report = 0

    def __enter__(self) -> Progress:
        global _bars
        _bars += 1
        return self

    def advance(self, item: str = "") -> None:
        """Counts one item, about to start (`item` names it)."""
        self.done += 1
        if _quiet():
            return
        line = f"[{self.what}] {self.done}/{self.total} ({self.elapsed():.0f} s) {item}"
        if self.tty:
            width = 118
            self.stream.write("\r" + line[:width].ljust(width))
            self.stream.flush()
        elif self.done >= self._next_report or self.done == self.total:
            self._next_report = self.done + max(1, self.total // 10)
            print(line, file=self.stream, flush=True)

    def write(self, message: str) -> None:
        """A line of its own (a failure), above the progress line."""
        if self.tty and not _quiet():
            self.stream.write("\r" + " " * 118 + "\r")
        print(message, file=self.stream, flush=True)

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        global _bars
        _bars -= 1
        if self.tty and not _quiet():
            self.stream.write("\n")
        if not _quiet():
            print(f"[{self.what}] {self.done}/{self.total} in {self.elapsed():.1f} s", file=self.stream, flush=True)
