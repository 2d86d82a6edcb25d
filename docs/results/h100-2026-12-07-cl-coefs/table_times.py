"""What rule_from_table.py, groups_rule.py and rule_gaps.py share: an op's candidate plans for a suite key and their
times in the shipped H200 table, or in a `tune --export` file (`use_export`) for the GPU it names (no GPU: the arrays
are strided views of one element, never read)."""

import argparse
import gzip
import json
from pathlib import Path

import ml_dtypes
import numpy as np
from numpy.lib.stride_tricks import as_strided

from rust_kernels import tuning
from rust_kernels.families.batch_norm import training
from rust_kernels.runtime import Placement

H200 = tuning.Gpu("NVIDIA H200", 132, "sm_90", 60 << 20)
ALIGNMENT = 16  # the bytes torch aligns its tensors to, and more
STORAGE = {"f32": np.float32, "bf16": ml_dtypes.bfloat16}
_source = {"gpu": H200, "entries": None}  # None: the shipped table of the GPU


def use_export(path: Path) -> str:
    """Reads the times of `path` (`tune --export`'s file) from now on, for the GPU it names; returns its name."""
    table = json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes())
    _source["gpu"] = tuning.Gpu(table["gpu"], table["sms"], "sm_90", 0)
    _source["entries"] = {name: tuning.Entry(**record) for name, record in table["entries"].items()}
    return table["gpu"]


def table_argument(doc: str) -> None:
    """A script's command line (`doc`: its docstring): --table FILE reads a `tune --export` file instead of the
    shipped H200 table (use_export)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--table", type=Path, help="a `tune --export` file instead of the shipped H200 table")
    options = parser.parse_args()
    if options.table:
        print(f"times: {options.table.name}, measured on {use_export(options.table)}")


def clear() -> None:
    """Forgets the training rule's and candidates' memos (after a constant was patched, or before)."""
    training.plan.cache_clear()
    training._candidates.cache_clear()


def candidates_and_times(op, big, scalars, shape, dtype, channels_last):
    """The op's candidates (the rule's first) for x of `shape` in `dtype` (the arrays named in `big`; the others
    per-channel f32), called with `scalars` (by name), and {plan: µs} of those the table holds."""
    _, c, h, w = shape
    e = np.dtype(STORAGE[dtype]).itemsize
    strides = (h * w * c * e, e, w * c * e, c * e) if channels_last else (c * h * w * e, h * w * e, w * e, e)
    x = as_strided(np.zeros(1, STORAGE[dtype]), shape, strides)
    arrays = tuple(x if i.name in big.split() else np.zeros(c, np.float32) for i in op.inputs)
    _, problem = op.problem(arrays, tuple(scalars.get(s.name, s.default) for s in op.scalars), "host")
    gpu = _source["gpu"]
    placement = Placement(ALIGNMENT, gpu.sms)
    key, names = tuning.key(problem, placement, gpu), {}
    table = tuning.shipped(gpu.slug) if _source["entries"] is None else _source["entries"]
    plans = op.candidates(problem, placement)
    times = {}
    for plan in plans:
        entry = table.get(tuning.entry_name(key, plan, "sm_90", names))
        if entry is not None and entry.us is not None:
            times[plan] = entry.us
    return plans, times
