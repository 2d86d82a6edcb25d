#!/usr/bin/env python3
"""Merges tables exported by `python -m rust_kernels tune --export FILE` (on a GPU) into the package's table for that
GPU, later files' entries replacing earlier ones of the same name, then drops every entry that no current candidate
plan can name: an entry's name hashes its kernels' source keys, so a kernel changed since it was timed leaves it
unreachable. For each key in the table every registry op with candidates is asked for its plans (training and eval
mode, every activation, deterministic or not). Needs no GPU; prints what it kept and dropped. A merge that would keep
no entry at all writes nothing and names --carry-from (every name changes with the sources all kernels include).

    python scripts/merge_tuning_table.py [EXPORTED.json.gz ...]   # merge into, and prune, the H200 table
    python scripts/merge_tuning_table.py --fresh EXPORTED.json.gz ...   # the exports alone replace its entries
    python scripts/merge_tuning_table.py --carry-from REV   # keep the timings of kernels whose PTX did not change

--carry-from is for a change to sources kernels' keys include (cuda_std, the crate templates, a family's templates or
specs): each entry named under commit REV's sources (its kernels' source keys as REV's own code computes them, in a
worktree of REV) is named anew where every kernel of its plan builds to the same PTX as it did at REV. REV's PTX is
read from the build cache (where building at REV left it: `bash scripts/build_wheel.sh` there); today's is built.
An entry whose kernels changed, or whose REV PTX is not in the cache, is dropped.

--fresh is for timings the tuner took wrongly before (12-02: host time inside the spans of calls on the legacy default
stream): the table keeps none of its entries, only the exports' (re-timed with `tune --force`).
"""

from __future__ import annotations

import argparse
import collections
import gzip
import itertools
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

import numpy as np  # noqa: E402

from rust_kernels import builder, registry, tuning  # noqa: E402
from rust_kernels import cache as kcache  # noqa: E402
from rust_kernels.bench.tune import write_table  # noqa: E402
from rust_kernels.dtypes import DTYPES  # noqa: E402
from rust_kernels.families.batch_norm import common  # noqa: E402
from rust_kernels.families.batch_norm.training import ACTIVATIONS  # noqa: E402
from rust_kernels.kernels import Kernel  # noqa: E402
from rust_kernels.runtime import Placement, Plan  # noqa: E402

TABLE = ROOT / "python" / "rust_kernels" / "tables" / "nvidia-h200-132sm.json.gz"
# The scalars whose values give an op other candidates; every other scalar keeps its default.
CHOICES = {"training": (False, True), "deterministic": (True, False), "activation": tuple(ACTIVATIONS)}
STATISTICS = ("save_mean", "save_invstd", "mean", "invstd")  # inputs in the accumulation type
PER_CHANNEL = ("weight", "bias", "running_mean", "running_var", *STATISTICS)  # [C] inputs; the rest are [B, C, H, W]


def read(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if path.name.endswith(".gz") else data)  # type: ignore[no-any-return]


def current_names(key: str, gpu: tuning.Gpu) -> set[str]:
    """The entry names every op's candidates have for tuning key `key` (shape, dtype key, order, alignment, GPU)."""
    return {tuning.entry_name(key, plan, gpu.arch) for plan in candidate_plans(key, gpu)}


def candidate_plans(key: str, gpu: tuning.Gpu) -> Iterator[Plan]:
    """Every op's candidate plans for tuning key `key`."""
    shape, dtype_key, order, alignment, _, sms = json.loads(key)
    storage, param = common.split_key(dtype_key)
    b, c, h, w = shape
    big = np.zeros((b, h, w, c), DTYPES[storage].numpy_dtype()).transpose(0, 3, 1, 2) if order else \
        np.zeros((b, c, h, w), DTYPES[storage].numpy_dtype())  # fmt: skip
    placement = Placement(alignment, sms)
    for op in registry.ops():
        if op.candidates is None:
            continue
        arrays = tuple(big if i.name not in PER_CHANNEL else np.ones(c, DTYPES[storage].acc_numpy
                       if i.name in STATISTICS else DTYPES[param].numpy_dtype()) for i in op.inputs)  # fmt: skip
        for values in itertools.product(*(CHOICES.get(s.name, (s.default,)) for s in op.scalars)):
            try:
                _, problem = op.problem(arrays, values, "host")
            except Exception:  # an op that does not take these arrays (another rank, mode or layout)
                continue
            if tuning.key(problem, placement, gpu) == key:
                yield from op.candidates(problem, placement)


# Run in commit REV's checkout: each kernel id read from stdin (as Kernel.id writes it) to its source key there, or
# None where REV has no such instance.
_REV_KEYS = """
import json, sys
from rust_kernels import builder, kernels
classes = {cls.spec.name: cls for cls in kernels.CATALOGUE.values()}
out = {}
for kid in json.load(sys.stdin):
    name, key, *values = kid.split("__")
    dtype, _, param = key.partition("-")
    try:
        kernel = classes[name](*map(int, values), dtype=dtype, param_dtype=param or None)
        out[kid] = builder.source_key(kernel, sys.argv[1])
    except Exception:
        out[kid] = None
print(json.dumps(out))
"""


def source_keys_at(rev: str, arch: str, ids: list[str]) -> dict[str, str | None]:
    """The source keys the kernels `ids` had at commit `rev` (its templates, specs and crate sources), as that
    commit's own code computes them; None for a kernel `rev` did not have."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), rev], check=True,
                       capture_output=True)  # fmt: skip
        try:
            env = {**os.environ, "PYTHONPATH": str(tree / "python")}
            done = subprocess.run([sys.executable, "-c", _REV_KEYS, arch], env=env, check=True, capture_output=True,
                                  text=True, cwd=tmp, input=json.dumps(ids))  # fmt: skip
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=True)
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def carry(table: dict[str, Any], rev: str, arch: str = "sm_90") -> tuple[int, int]:
    """Names anew the entries named under commit `rev`'s sources whose kernels all build to the PTX they built to at
    `rev`, in place of their old names. Returns (carried, not carried: a kernel's PTX changed or was not in the
    cache); what is not carried keeps its old name, which the prune then drops."""
    gpu = tuning.Gpu(table["gpu"], table["sms"], arch, 0)
    entries = table["entries"]
    plans = [(key, plan) for key in sorted({e["key"] for e in entries.values()}) for plan in candidate_plans(key, gpu)]
    then = source_keys_at(rev, arch, sorted({launch.kernel.id for _, plan in plans for launch in plan.launches}))
    seen: dict[str, bool] = {}

    def unchanged(kernel: Kernel) -> bool:
        if kernel.id not in seen:
            key = kcache.resolve(then[kernel.id])  # type: ignore[arg-type]
            entry = kcache.read_entry(key) if key else None
            seen[kernel.id] = entry is not None and entry.file("kernel.ptx").read_bytes() == \
                builder.build(kernel, arch).read_bytes()  # fmt: skip
        return seen[kernel.id]

    carried, old_names, refused = {}, set(), 0
    for key, plan in plans:
        if any(then[launch.kernel.id] is None for launch in plan.launches):
            continue  # a kernel new since rev: no entry was named under its sources
        with mock.patch.object(builder, "source_key", lambda kernel, _arch=None: then[kernel.id]):
            old = tuning.entry_name(key, plan, arch)
        if old not in entries:
            continue
        if all(unchanged(launch.kernel) for launch in plan.launches):
            carried[tuning.entry_name(key, plan, arch)] = entries[old]
            old_names.add(old)
        else:
            refused += 1
    for old in old_names - carried.keys():
        del entries[old]
    entries.update(carried)
    return len(carried), refused


def prune(table: dict[str, Any], arch: str = "sm_90") -> tuple[dict[str, Any], collections.Counter[str]]:
    """The table's entries that a current candidate names, and a count of the dropped ones by first kernel."""
    gpu = tuning.Gpu(table["gpu"], table["sms"], arch, 0)
    entries = table["entries"]
    valid: set[str] = set()
    for key in sorted({e["key"] for e in entries.values()}):
        valid |= current_names(key, gpu)
    dropped = collections.Counter(e["plan"].split("__")[0] for n, e in entries.items() if n not in valid)
    return {n: e for n, e in entries.items() if n in valid}, dropped


def rendered_once() -> Any:
    """Kernel.source rendered once per kernel for the run: the candidates of each key are new Kernel objects, and
    rendering their templates again for every key took about a second a key."""
    memo: dict[Kernel, str] = {}
    render = Kernel.source.fget

    def source(kernel: Kernel) -> str:
        if kernel not in memo:
            memo[kernel] = render(kernel)
        return memo[kernel]

    return mock.patch.object(Kernel, "source", property(source))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("exported", nargs="*", type=Path, help="tables from `tune --export`, merged in this order")
    p.add_argument("--table", type=Path, default=TABLE, help=f"the package's table (default {TABLE.name})")
    p.add_argument("--fresh", action="store_true", help="drop the table's own entries: the exports replace them")
    p.add_argument("--carry-from", metavar="REV", help="name anew the entries of kernels unchanged since commit REV")
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
    with rendered_once():
        if options.carry_from:
            carried, refused = carry(table, options.carry_from)
            print(f"carried {carried} entries from {options.carry_from}; {refused} not (their kernels' PTX changed)")
        kept, dropped = prune(table)
    if merged and not kept:
        print(f"{options.table.name}: no current candidate names any of its {merged} entries, so it is left as it was: "
              "the sources every kernel's key includes changed (cuda_std, the crate templates)? --carry-from REV "
              "keeps the entries of kernels whose PTX did not change", file=sys.stderr)  # fmt: skip
        return 1
    table["entries"] = kept
    write_table(options.table, table)
    print(f"{options.table.name}: {before} entries, {merged} merged, {len(table['entries'])} kept; dropped "
          f"{sum(dropped.values())}: {dict(dropped) or 'none'}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
