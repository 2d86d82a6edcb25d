"""Shape suites: classes of inputs broader than any family's bench shapes, each a JSON file in bench/suites/ committed
with the script that made it (scripts/bn_shape_suite.py). A baseline names its suite (`Baseline.suite`);
`bench --suite` times every baseline that has one over it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SUITES = Path(__file__).resolve().parent / "suites"
Shape = tuple[int, ...]


def _entries(name: str) -> list[dict]:
    path = SUITES / f"{name}.json"
    if not path.is_file():
        known = sorted(p.stem for p in SUITES.glob("*.json"))
        raise FileNotFoundError(f"no shape suite {name!r} (known: {known})")
    return json.loads(path.read_text())["shapes"]


def shapes(name: str) -> list[Shape]:
    """The suite's shapes, in the file's order."""
    return [tuple(entry["shape"]) for entry in _entries(name)]


def sources(name: str) -> dict[Shape, list[str]]:
    """Where each shape comes from ("resnet50@32", "C = 1", ...)."""
    return {tuple(entry["shape"]): entry["from"] for entry in _entries(name)}


def spread(count: int) -> list[int]:
    """0 .. count-1 in an order whose every prefix is spread evenly over the range (golden-ratio steps): a run cut
    short by its time budget has sampled the whole suite, not its first models."""
    golden = (5**0.5 - 1) / 2
    return sorted(range(count), key=lambda i: (i * golden) % 1.0)


def by_spread(cases: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """`cases`, each led by its shape's index, shape by shape in `spread`'s order (stable: the cases of one shape
    keep their order), without the index."""
    rank = {i: r for r, i in enumerate(spread(max((case[0] for case in cases), default=-1) + 1))}
    return [case[1:] for case in sorted(cases, key=lambda case: rank[case[0]])]
