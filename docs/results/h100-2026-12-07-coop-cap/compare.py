"""From one tuning export holding two forms (A, B) of the channels_last cooperative and persistent kernels (both sides'
runs shared one tuning cache, B's export taken last), per key and direction of the channels_last training op: the
best plan of each form of those kernels (cooperative ones by grid: CTAs an SM), the best other plan, and the best
time of each side. An entry's form is read from its name, which hashes its kernel's source key (tuning.entry_name):
`keys` prints those kernels' source keys for the tree as it is, once with side A's sources and once with B's.

    python compare.py keys > keys_A.json    # and, with B's sources: > keys_B.json
    python compare.py table EXPORT keys_A.json keys_B.json
"""

import gzip
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

SMS = 132
CHANGED = ("batch_norm_2d_cooperative_", "batch_norm_2d_persistent_")


def keys() -> None:
    from rust_kernels import builder, kernels

    changed = [k for k in kernels.instances() if k.name.startswith(CHANGED)]
    print(json.dumps({k.id: builder.source_key(k, "sm_90") for k in changed}, indent=0, sort_keys=True))


def sides(name: str, entry: dict, sources: dict[str, dict[str, str]]) -> str:
    """'A', 'B', or 'AB' where the kernel's source is the same on both sides."""
    from rust_kernels import cache

    kernel = entry["plan"].split()[0]
    named = {side: cache.sha256(json.dumps([entry["key"], entry["plan"], [s[kernel]]]).encode())[:40]
             for side, s in sources.items()}  # fmt: skip
    return "AB" if named["A"] == named["B"] else next(side for side, n in named.items() if n == name)


def kind(entry: dict) -> str:
    kernel = entry["plan"].split()[0]
    if "_persistent_" in kernel:
        return "persistent"
    values = dict(v.split("=") for v in entry["plan"].split()[1:] if "=" in v)
    shape, dtype = json.loads(entry["key"])[:2]
    groups = shape[1] // (8 if dtype.startswith(("bf16", "f16")) else 4)  # units of 16 bytes
    return f"coop {round(groups // int(values['cols']) * int(values['split']) / SMS)}/SM"


def table(export: str, keys_a: str, keys_b: str) -> None:
    entries = json.loads(gzip.decompress(Path(export).read_bytes()))["entries"]
    sources = {"A": json.loads(Path(keys_a).read_text()), "B": json.loads(Path(keys_b).read_text())}
    best: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for name, e in entries.items():
        kernel = e["plan"].split()[0]
        if e["us"] is None or "[0, 2, 3, 1]" not in e["key"]:
            continue
        direction = "forward" if "forward" in kernel or "stats" in kernel else "backward"
        direction += " + act" if "_act" in e["plan"] else ""
        if kernel.startswith(CHANGED):
            labels = [f"{side} {kind(e)}" for side in sides(name, e, sources)]
        else:
            labels = ["other"]
        slot = best[e["key"], direction]
        for label in labels:
            slot[label] = min(slot.get(label, float("inf")), e["us"])
    gains, kernels = defaultdict(list), defaultdict(list)
    for (key, direction), slot in sorted(best.items()):
        a = min(v for k, v in slot.items() if not k.startswith("B"))
        b = min(v for k, v in slot.items() if not k.startswith("A"))
        if not any(k.startswith("B") for k in slot):
            continue  # B never timed (a key only side A's runs reached)
        shape, dtype = json.loads(key)[:2]
        gains[dtype].append(a / b)
        for which in ("coop", "persistent"):  # each kernel's best against its other form's
            forms = [min((v for k, v in slot.items() if k.startswith(f"{side} {which}")), default=0) for side in "AB"]
            if all(forms):
                kernels[dtype, which].append(forms[0] / forms[1])
        shown = ", ".join(f"{k} {v:.2f}" for k, v in sorted(slot.items()))
        print(f"{'x'.join(map(str, shape))} {dtype} {direction}: {shown}; best A / best B {a / b:.3f}")
    for dtype, g in sorted(gains.items()):
        print(f"{dtype}: {len(g)} key-directions, best time A / B: median {statistics.median(g):.3f}, "
              f"{min(g):.3f}-{max(g):.3f}, B faster by > 2% on {sum(x > 1.02 for x in g)}, slower by > 2% on "
              f"{sum(x < 1 / 1.02 for x in g)}")
    for (dtype, which), g in sorted(kernels.items()):
        print(f"{dtype} {which}: {len(g)} key-directions, its best time A / B: median {statistics.median(g):.3f}, "
              f"{min(g):.3f}-{max(g):.3f}")


if __name__ == "__main__":
    keys() if sys.argv[1] == "keys" else table(*sys.argv[2:5])
