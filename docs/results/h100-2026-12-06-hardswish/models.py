"""`python -m rust_kernels bench ...` (the model steps) with BatchNorm2d + Hardswish fused by `convert(fuse=True)`
(`with`) or, as before Hardswish was among the fused activations, left as our BatchNorm2d and then torch's Hardswish
(`without`), each side its own process with torch's BN as the anchor.

    python models.py with|without BENCH_ARGS...
"""

import sys

import torch

from rust_kernels import cli
from rust_kernels.torch import modules

side, *args = sys.argv[1:]
if side not in ("with", "without"):
    raise SystemExit(f"side: expected with or without, got {side!r}")
if side == "without":  # what convert(fuse=True) matched before: no Hardswish module or function
    del modules._ACTIVATION_MODULES[torch.nn.Hardswish]
    del modules._ACTIVATION_FUNCTIONS[torch.nn.functional.hardswish]
sys.exit(cli.main(["bench", *args]))
