"""Where the channels_last one-launch rule's width (training.columns_rule) could take one block an SM (the narrowest
width whose blocks fit one wave) instead of the widest of its options, per direction and dtype over the suite: the
shapes, and with --table the two plans' times. The rule takes it in the 16-bit backward only (these times). Needs no
GPU.

    python column_changes.py > column_shapes.txt          # the shapes, for go3.sh's tune
    python column_changes.py --table shipped              # the shipped H200 table's times
    python column_changes.py --table device/run3/tune_cols.json.gz
"""

import argparse
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "h100-2026-12-07-cl-coefs"))
from table_times import candidates_and_times, use_export  # noqa: E402

from rust_kernels import ops  # noqa: E402
from rust_kernels.bench import suite  # noqa: E402
from rust_kernels.families.batch_norm import training  # noqa: E402

SMS = 132
CALLS = (("forward", "batch_norm_2d_forward", "x"), ("backward", "batch_norm_2d_backward", "dy x"))


def widths(shape, dtype, vectorized):
    """columns_rule's widths: column_options', else those whose block is at most SMALL_BLOCK_BYTES; and the width it
    took before (the widest of the options, else the narrowest)."""
    options = sorted({c for _, c in training.column_options(shape, dtype, vectorized, SMS)})
    small = [c for c in training.column_widths(shape, dtype, vectorized, SMS)
             if 0 < training.block_bytes(shape, dtype, vectorized, c) <= training.SMALL_BLOCK_BYTES]  # fmt: skip
    return options or small, (options[-1] if options else small[0]) if options or small else None


def changed():
    """(direction, shape, dtype, one-wave plan, widest plan) wherever the rule takes a one-launch plan and the two
    widths differ."""
    for shape in suite.shapes("batch_norm_2d"):
        for dtype in ("f32", "bf16"):
            for which, _, _ in CALLS:
                plan = training.plan(which, shape, dtype, "f32", 16, SMS, True)
                if plan.kernel.__class__ not in training.FUSED_COLUMNS.values():
                    continue
                vectorized = plan.kernel.vectorized
                options, old = widths(shape, dtype, vectorized)
                groups = shape[1] // training.lanes(vectorized, dtype)
                new = next((c for c in options if groups // c <= SMS), old)
                if old != new:
                    yield which, shape, dtype, *(column_plan(which, shape, dtype, vectorized, c) for c in (new, old))


def column_plan(which, shape, dtype, vectorized, cols):
    """The one-launch plan of width `cols` at columns_rule's CTA size."""
    units = shape[0] * shape[2] * shape[3] * cols
    block = max([b for b in training.FUSED_BLOCKS if units >= 4 * b], default=training.FUSED_BLOCKS[0])
    return training.fused_columns(which, shape, dtype, "f32", vectorized, block, cols)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--table", help="shipped (the H200 table) or a `tune --export` file")
    options = parser.parse_args()
    if not options.table:
        shapes = dict.fromkeys(shape for _, shape, _, _, _ in changed())
        print("\n".join("x".join(map(str, s)) for s in shapes))
        return
    if options.table != "shipped":
        print(f"times: {options.table}, measured on {use_export(Path(options.table))}")
    ratios = {}
    for which, shape, dtype, new, old in changed():
        _, name, big = next(c for c in CALLS if c[0] == which)
        _, times = candidates_and_times(getattr(ops, name).op, big, {"training": True}, shape, dtype, True)
        if new in times and old in times:
            ratios.setdefault((which, dtype), []).append(times[old] / times[new])
            print(
                f"{which} {'x'.join(map(str, shape))} {dtype}: widest {times[old]:.2f} µs, one wave {times[new]:.2f} µs"
            )
    for (which, dtype), found in sorted(ratios.items()):
        print(
            f"{which} {dtype}: {len(found)} keys, widest / one wave: min {min(found):.2f} median "
            f"{statistics.median(found):.2f} max {max(found):.2f}, slower by > 3%: {sum(r < 0.97 for r in found)}"
        )


if __name__ == "__main__":
    main()
