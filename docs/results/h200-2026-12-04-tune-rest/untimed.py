"""The suite shapes 12-04's tune run (docs/results/h200-2026-12-04-caps-shipped/tune.sh) did not begin: its four
families in `tune`'s spread order, after the 1537 cases its budget allowed (its log: "1431 of 2968 cases not
begun"). Written one BxCxHxW per line, for `tune --shapes FILE`: `tune` otherwise walks the served cases again first
(0.28 s each, for their inputs)."""

import sys
from pathlib import Path

from rust_kernels.bench import baselines, suite
from rust_kernels.bench.tune import shapes_of

FAMILIES = ("batch_norm_2d_training_channels_last", "batch_norm_2d_training_relu_channels_last",
            "batch_norm_2d_training_add_relu_channels_last", "batch_norm_2d_training_add_relu")  # fmt: skip
BEGUN = 1537

families = [baselines.baseline(name) for name in FAMILIES]
indexed = [(i, f, s, d) for d in ("f32", "bf16-f32") for f in families if d in f.dtypes
           for i, s in enumerate(shapes_of("suite", f))]  # fmt: skip
rest = suite.by_spread(indexed)[BEGUN:]
shapes = list(dict.fromkeys(shape for _, shape, _ in rest))
Path(sys.argv[1]).write_text("".join("x".join(map(str, s)) + "\n" for s in shapes))
print(f"{len(rest)} cases not begun, {len(shapes)} shapes")
