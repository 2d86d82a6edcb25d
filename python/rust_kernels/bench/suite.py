"""The shape suite: shapes of a class of inputs broader than any family's bench shapes, committed with the script
that made them (scripts/bn_shape_suite.py: every BatchNorm2d input of eight torchvision models at batch 1, 32 and
128, and the extremes). `bench --suite` times every family whose shapes have the suite's rank over it."""

from __future__ import annotations

import json
from pathlib import Path

SUITE = Path(__file__).resolve().parent / "suites" / "batch_norm_2d.json"
Shape = tuple[int, ...]


def shapes(path: Path = SUITE) -> list[Shape]:
    """The suite's shapes, in the file's order."""
    return [tuple(entry["shape"]) for entry in json.loads(path.read_text())["shapes"]]


def sources(path: Path = SUITE) -> dict[Shape, list[str]]:
    """Where each shape comes from ("resnet50@32", "C = 1", ...)."""
    return {tuple(entry["shape"]): entry["from"] for entry in json.loads(path.read_text())["shapes"]}
