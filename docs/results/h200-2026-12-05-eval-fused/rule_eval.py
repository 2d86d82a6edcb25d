"""The channels_last training rule against the forced tune's timings (cl_small.sh's exports): per key-direction the
rule's plan and its time, and the time of the one-launch plan at the narrowest width (one channel unit a CTA; the
CTA as the rule sizes it) with its block's bytes, for one checkout's package; then two such files compared, and the
old rule's two-launch plans against that one-launch plan by block bytes.

    python rule_eval.py PYTHON_DIR OUT.json EXPORT.json.gz ...   # PYTHON_DIR: a checkout's python/
    python rule_eval.py --compare OLD.json NEW.json
"""

import collections
import gzip
import json
import statistics
import sys


def timings(exports: list[str]) -> dict[tuple[str, str], dict[str, float]]:
    """(key, op) -> plan label -> us; the add + ReLU backward's entries under the training backward's label."""
    out: dict[tuple[str, str], dict[str, float]] = collections.defaultdict(dict)
    for path in exports:
        with open(path, "rb") as f:
            entries = json.loads(gzip.decompress(f.read()))["entries"]
        for e in entries.values():
            if e.get("us") is None:
                continue
            mask, _, rest = e["plan"].partition(" + ")
            if mask.startswith("batch_norm_2d_add_relu_mask"):
                out[(e["key"], "add_relu")][rest] = e["us"]
            else:
                out[(e["key"], "plain")][e["plan"]] = e["us"]
    return out


def rules(python_dir: str, out_path: str, exports: list[str]) -> None:
    sys.path.insert(0, python_dir)
    from rust_kernels.dtypes import DTYPES
    from rust_kernels.families.batch_norm import common, training

    out = {}
    for (key, op), labels in timings(exports).items():
        shape, dtype_key, order, alignment, _, sms = json.loads(key)
        if order is None:
            continue
        storage, param = common.split_key(dtype_key)
        for which, act in (
            [("backward", 0)] if op == "add_relu" else [(w, a) for w in ("forward", "backward") for a in (0, 1)]
        ):
            rule = training.plan(which, tuple(shape), storage, param, alignment, sms, True, act)
            if rule.label not in labels:
                continue
            vectorized = training.vector_mode(tuple(shape), storage, alignment, True)
            rows = shape[0] * shape[2] * shape[3]
            block = max([b for b in training.FUSED_BLOCKS if rows >= 4 * b], default=training.FUSED_BLOCKS[0])
            narrow = training.fused_columns(which, tuple(shape), storage, param, vectorized, block, 1, act).label
            bytes_ = rows * training.lanes(vectorized, storage) * DTYPES[storage].size
            out[f"{key}|{op}|{which}|{act}"] = [rule.label, labels[rule.label], dtype_key, which, op,
                                                labels.get(narrow), bytes_]
    with open(out_path, "w") as f:
        json.dump(out, f)
    print(f"{len(out)} key-directions with the rule's plan timed")


def compare(old_path: str, new_path: str) -> None:
    with open(old_path) as f:
        old = json.load(f)
    with open(new_path) as f:
        new = json.load(f)
    groups = collections.defaultdict(list)
    for k in set(old) & set(new):
        if old[k][0] != new[k][0]:
            groups[(new[k][4], new[k][3], new[k][2])].append(old[k][1] / new[k][1])
    ratios = [r for v in groups.values() for r in v]
    print(f"rule's plan changed on {len(ratios)} of {len(set(old) & set(new))} key-directions; old / new time: median"
          f" {statistics.median(ratios):.3f}, faster by > 5 % on {sum(r > 1.05 for r in ratios)}, slower by > 5 % on"
          f" {sum(r < 0.95 for r in ratios)}, worst {min(ratios):.2f}x, best {max(ratios):.2f}x")
    for (op, which, dtype), v in sorted(groups.items()):
        print(f"  {op:8} {which:8} {dtype:8} {len(v):4}: median {statistics.median(v):.3f}, worst {min(v):.2f}x")
    print("the old rule's two-launch plans / the narrowest one-launch plan, by its block's bytes:")
    two = [v for v in old.values() if "fused" not in v[0] and v[5] is not None]
    for lo, hi in [(0, 8), (8, 16), (16, 32), (32, 64), (64, 128), (128, 256), (256, 1 << 20)]:
        r = [v[1] / v[5] for v in two if lo << 10 <= v[6] < hi << 10]
        if r:
            print(f"  {lo:>4}-{hi:<7} KB: {len(r):4} key-directions, median {statistics.median(r):.3f}, one launch"
                  f" faster by > 5 % on {sum(x > 1.05 for x in r)}, slower by > 5 % on {sum(x < 0.95 for x in r)},"
                  f" worst {min(r):.2f}x")


if sys.argv[1] == "--compare":
    compare(sys.argv[2], sys.argv[3])
else:
    rules(sys.argv[1], sys.argv[2], sys.argv[3:])
