"""The cooperative kernels past their candidate bound: what a direction reads twice (x; dy and x) between 24 MiB
(training.COOPERATIVE_BYTES) and 64 MiB, where 12-06's run left them untimed (`../h100-2026-12-06-cooperative/`; the
H100's and H200's L2 is 50 MB). The same probe (every autotuner candidate of each direction, GPU time, L2 flushed,
each cooperative plan checked against float64 first), with the bound raised to PROBE_BYTES on the shapes whose
direction reads between the two.

    python coop_bound.py time [FIRST]   # on the GPU (RUST_KERNELS_TUNING=off), from the FIRST shape on (default 0)
"""

import importlib.util
import math
import sys
from pathlib import Path

from rust_kernels.families.batch_norm import training

PROBE_BYTES = 64 << 20
FROM_BYTES = 24 << 20  # training.COOPERATIVE_BYTES when this probe ran first (40 MiB since)
spec = importlib.util.spec_from_file_location(
    "probe", Path(__file__).resolve().parents[1] / "h100-2026-12-06-cooperative" / "probe.py"
)
probe = importlib.util.module_from_spec(spec)
spec.loader.exec_module(probe)


def past_bound(shape, key: str) -> bool:
    """Whether one of the shape's directions reads twice more than FROM_BYTES and at most PROBE_BYTES."""
    x = math.prod(shape) * (2 if key == "bf16-f32" else 4)
    return any(FROM_BYTES < read <= PROBE_BYTES for read in (x, 2 * x))


if __name__ == "__main__":
    shapes = [(32, 384, 28, 28), (128, 480, 14, 14), (32, 1024, 14, 14), (32, 64, 56, 56), (32, 256, 28, 28),
              (32, 512, 28, 28), (128, 672, 7, 7), (32, 864, 14, 14), (64, 64, 56, 56), (64, 256, 28, 28)]  # fmt: skip
    probe.SHAPES = [s for s in shapes if any(past_bound(s, k) for k in probe.KEYS)][int((sys.argv[2:] or [0])[0]) :]
    training.COOPERATIVE_BYTES = PROBE_BYTES
    {"time": probe.time}[sys.argv[1]]()
