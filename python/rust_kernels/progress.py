"""Progress lines for long steps (toolchain set-up, cargo, ptxas), on stderr. RUST_KERNELS_QUIET=1 silences them."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from rust_kernels import config


def say(message: str) -> None:
    if not config.settings().quiet:
        print(f"[rust_kernels] {message}", file=sys.stderr, flush=True)


@contextmanager
def step(message: str) -> Iterator[None]:
    """Announces a step before it starts and reports its duration when it ends."""
    say(f"{message} ...")
    start = time.perf_counter()
    yield
    say(f"{message}: done in {time.perf_counter() - start:.1f} s")
