"""`python -m rust_kernels bench ...` (the model steps) with the block kernels (`with`: RUST_KERNELS_BLOCK=1) or
without them (`without`: 0), each side its own process with torch's BN as the anchor.

    python models.py with|without BENCH_ARGS...
"""

import os
import sys

from rust_kernels import cli

side, *args = sys.argv[1:]
if side not in ("with", "without"):
    raise SystemExit(f"side: expected with or without, got {side!r}")
os.environ["RUST_KERNELS_BLOCK"] = "1" if side == "with" else "0"  # read by the package at each call
sys.exit(cli.main(["bench", *args]))
