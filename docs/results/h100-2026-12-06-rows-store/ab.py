"""The row kernels (examples/rows, the benchmark's plans) beside a copy of the same bytes, 2^24 elements per shape,
512-16384 columns, f32 and bf16, checked against PyTorch: run with the package before row::Held::store wrote its
packs in one 16-byte store (1df01f3's python/ and crates, and their kernels' cache) and after (the checkout's).
Before, the softmax's packs were stored as 8-, 4- and 2-byte pieces (bf16: 16 store instructions a thread at 32
elements, f32: 24; 4 and 8 after).

    python ab.py build           # here, into RUST_KERNELS_CACHE_DIR
    python ab.py time LABEL      # on the GPU
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "h200-2026-12-05-rows-erf-fast"))
import ab
import run  # (examples/rows/run.py, on the path ab put it on)

LABEL = sys.argv[2] if len(sys.argv) > 2 else "ours"


def pairs():
    """(case, dtype, columns, threads, ((LABEL, kernel),)) over the bench's cases and shapes."""
    for case in run.CASES:
        for dtype in ("f32", "bf16"):
            for n in run.BENCH_COLUMNS:
                threads, consts = run.plan(case, n, 4 if dtype == "f32" else 8)
                yield case, dtype, n, threads, ((LABEL, run.kernel_for(case, dtype, threads, consts)),)


ab.pairs = pairs
if __name__ == "__main__":
    ab.build() if sys.argv[1] == "build" else ab.time()
