#!/usr/bin/env bash
# Here (Rust), from the repository root: the kernels run.sh launches from the checkout (the row kernels' GPU checks
# and ab.py's pairs), built for sm_90 into a cache carried as whl_carry/rows.tgz. run.sh also needs the sm_90 wheel
# in whl_carry/whl.tar.xz (as ../h200-2026-12-05-persistent/build.sh says).
set -euo pipefail
here=docs/results/h100-2026-12-05-ab
rm -rf /tmp/rkc2 && export PYTHONPATH=$PWD/python RUST_KERNELS_CACHE_DIR=/tmp/rkc2
python3 docs/results/h200-2026-12-04-rows-fast-math/prebuild.py
python3 $here/ab.py build
mkdir -p whl_carry && tar czf whl_carry/rows.tgz -C /tmp/rkc2 kernels by-source
