"""The row kernels holding the row as row::Tile holds it ("tile") against row::PackedTile ("packed"), in one process,
each beside a copy of the same bytes, 2^24 elements per shape, 512-16384 columns, f32 and bf16 (the timing of
../h200-2026-12-05-rows-erf-fast/ab.py over these pairs): RMSNorm and LayerNorm as the examples were before 4a747ae
(tile/) and are today (examples/rows); softmax as the example is (tile) and held as packs, each exponential computed
twice (packed/softmax_packed, an experiment).

    python ab.py build    # here, into RUST_KERNELS_CACHE_DIR
    python ab.py time     # on the GPU
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "h200-2026-12-05-rows-erf-fast"))
import ab  # noqa: E402
import run  # noqa: E402  (examples/rows/run.py, on the path ab put it on)

import rust_kernels  # noqa: E402

TILE, PACKED = rust_kernels.Program(HERE / "tile"), rust_kernels.Program(HERE / "packed")


def pairs():
    """(case, dtype, columns, threads, (("tile", kernel), ("packed", kernel))) over the bench's shapes."""
    for case in run.CASES:
        if case.name not in (*ab.NORMS, "softmax"):
            continue
        for dtype in ("f32", "bf16"):
            for n in run.BENCH_COLUMNS:
                threads, consts = run.plan(case, n, 4 if dtype == "f32" else 8)
                example = run.kernel_for(case, dtype, threads, consts)
                if case.name == "softmax":
                    other = PACKED.kernel("softmax_packed", dtype=dtype, block=threads, **consts)
                    yield case, dtype, n, threads, (("tile", example), ("packed", other))
                else:
                    tile = TILE.kernel(case.name.replace("_forward", "_tile"), dtype=dtype, block=threads, **consts)
                    yield case, dtype, n, threads, (("tile", tile), ("packed", example))


ab.pairs = pairs
if __name__ == "__main__":
    ab.build() if sys.argv[1] == "build" else ab.time()
