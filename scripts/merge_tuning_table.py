#!/usr/bin/env python3
"""Merges tables exported by `python -m rust_kernels tune --export FILE` (on a GPU) into the package's table for that
GPU, later files' entries replacing earlier ones of the same name, then drops every entry that no current candidate
plan can name: an entry's name hashes its kernels' source keys, so a kernel changed since it was timed leaves it
unreachable. For each key in the table every registry op with candidates is asked for its plans (training and eval
mode, every activation, deterministic or not). Needs no GPU; prints what it kept and dropped.

    python scripts/merge_tuning_table.py [EXPORTED.json.gz ...]   # merge into, and prune, the H200 table
    python scripts/merge_tuning_table.py --fresh EXPORTED.json.gz ...   # the exports alone replace its entries

--fresh is for timings the tuner took wrongly before (12-02: host time inside the spans of calls on the legacy default
stream): the table keeps none of its entries, only the exports' (re-timed with `tune --force`).
"""

from __future__ import annotations

import argparse
import collections
import gzip
import itertools
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

import numpy as np  # noqa: E402

from rust_kernels import registry, tuning  # noqa: E402
from rust_kernels.bench.tune import write_table  # noqa: E402
from rust_kernels.dtypes import DTYPES  # noqa: E402
from rust_kernels.families.batch_norm import common  # noqa: E402
from rust_kernels.runtime import Placement  # noqa: E402

TABLE = ROOT / "python" / "rust_kernels" / "tables" / "nvidia-h200-132sm.json.gz"
# The scalars whose values give an op other candidates; every other scalar keeps its default.
CHOICES = {"training": (False, True), "deterministic": (True, False), "activation": ("relu", "silu", "relu6")}
STATISTICS = ("save_mean", "save_invstd", "mean", "invstd")  # inputs in the accumulation type


def read(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if path.name.endswith(".gz") else data)  # type: ignore[no-any-return]


def current_names(key: str, gpu: tuning.Gpu) -> set[str]:
    """The entry names every op's candidates have for tuning key `key` (shape, dtype key, order, alignment, GPU)."""
    shape, dtype_key, order, alignment, _, sms = json.loads(key)
    storage, param = common.split_key(dtype_key)
    b, c, h, w = shape
    big = np.zeros((b, h, w, c), DTYPES[storage].numpy_dtype()).transpose(0, 3, 1, 2) if order else \
        np.zeros((b, c, h, w), DTYPES[storage].numpy_dtype())  # fmt: skip
    placement = Placement(alignment, sms)
    names: set[str] = set()
    for op in registry.ops():
        if op.candidates is None:
            continue
        arrays = tuple(big if i.name in ("x", "dy") else np.ones(c, DTYPES[storage].acc_numpy if i.name in STATISTICS
                       else DTYPES[param].numpy_dtype()) for i in op.inputs)  # fmt: skip
        for values in itertools.product(*(CHOICES.get(s.name, (s.default,)) for s in op.scalars)):
            try:
                _, problem = op.problem(arrays, values, "host")
            except Exception:  # an op that does not take these arrays (another rank, mode or layout)
                continue
            if tuning.key(problem, placement, gpu) == key:
                names.update(tuning.entry_name(key, plan, gpu.arch) for plan in op.candidates(problem, placement))
    return names


def prune(table: dict[str, Any], arch: str = "sm_90") -> tuple[dict[str, Any], collections.Counter[str]]:
    """The table's entries that a current candidate names, and a count of the dropped ones by first kernel."""
    gpu = tuning.Gpu(table["gpu"], table["sms"], arch, 0)
    entries = table["entries"]
    valid: set[str] = set()
    for key in sorted({e["key"] for e in entries.values()}):
        valid |= current_names(key, gpu)
    dropped = collections.Counter(e["plan"].split("__")[0] for n, e in entries.items() if n not in valid)
    return {n: e for n, e in entries.items() if n in valid}, dropped


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("exported", nargs="*", type=Path, help="tables from `tune --export`, merged in this order")
    p.add_argument("--table", type=Path, default=TABLE, help=f"the package's table (default {TABLE.name})")
    p.add_argument("--fresh", action="store_true", help="drop the table's own entries: the exports replace them")
    options = p.parse_args(argv)
    if options.fresh and not options.exported:
        p.error("--fresh needs the exported tables that replace the entries")
    table = read(options.table)
    before = len(table["entries"])
    if options.fresh:
        table["entries"] = {}
    for path in options.exported:
        extra = read(path)
        if (extra["gpu"], extra["sms"]) != (table["gpu"], table["sms"]):
            p.error(f"{path}: measured on {extra['gpu']} ({extra['sms']} SMs), the table is {table['gpu']}'s")
        table["entries"].update(extra["entries"])
    merged = len(table["entries"])
    table["entries"], dropped = prune(table)
    write_table(options.table, table)
    print(f"{options.table.name}: {before} entries, {merged} merged, {len(table['entries'])} kept; dropped "
          f"{sum(dropped.values())}: {dict(dropped) or 'none'}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
