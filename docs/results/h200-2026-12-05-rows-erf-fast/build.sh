#!/usr/bin/env bash
# Here (Rust), from the repository root: every kernel run.sh launches, built for sm_90 into rkc/ and tarred as
# rkc.tgz for the GPU machine (which has no Rust): the row kernels' checks and benchmark plans, ab.py's pairs and
# the math_eval kernel of examples/math/ulp.py.
set -euo pipefail
here=docs/results/h200-2026-12-05-rows-erf-fast
export PYTHONPATH=$PWD/python RUST_KERNELS_CACHE_DIR=$PWD/rkc
python3 docs/results/h200-2026-12-04-rows-fast-math/prebuild.py
python3 $here/ab.py build
python3 -c 'import rust_kernels as rk; p = rk.Program("examples/math"); [rk.build(p.kernel("math_eval", dtype=d), "sm_90") for d in ("f32", "f64")]'
tar czf rkc.tgz -C rkc .
