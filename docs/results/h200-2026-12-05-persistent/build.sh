#!/usr/bin/env bash
# Here, from the repository root: what run.sh needs beyond the sm_90 wheel (whl_carry/whl.tar.xz, from
# `bash scripts/build_wheel.sh /tmp/whl sm_90`, unzipped and `tar cf - . | xz -9 -T2`): the probe's kernels and the
# cooperative test kernel (tests/kernels/grid_share), built into a cache of their own, carried as whl_carry/rkc.tgz.
set -euo pipefail
here=docs/results/h200-2026-12-05-persistent
rm -rf /tmp/rkc && export RUST_KERNELS_CACHE_DIR=/tmp/rkc
PYTHONPATH=python python3 "$here/probe.py" build
PYTHONPATH=python python3 -c "
import rust_kernels
program = rust_kernels.Program('tests/kernels')
for dtype in ('f32', 'f64'):
    rust_kernels.build(program.kernel('grid_share', dtype=dtype), 'sm_90')"
mkdir -p whl_carry && tar czf whl_carry/rkc.tgz -C /tmp/rkc kernels by-source
