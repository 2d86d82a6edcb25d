#!/usr/bin/env bash
# On the H200, from the repository root, with the sm_90 wheel of this commit in whl_carry/ and prebuild.py's cache
# (its kernels/ and by-source/, tarred) in rkc.tgz: the math library's special values and ulps on the GPU, and the
# row kernels' checks in bf16 and f16.
set -uo pipefail
python -m pip install -q --no-deps --force-reinstall whl_carry/*.whl 2>&1 | grep -v WARN
mkdir -p rkc && tar xzf rkc.tgz -C rkc
export RUST_KERNELS_CACHE_DIR=$PWD/rkc RUST_KERNELS_QUIET=1
repo=$PWD
cd /tmp || exit 1  # the installed package, not the checkout's
timeout 120 python "$repo/examples/math/ulp.py" --backend cuda --n 16384 --save "$OUT/math_cuda.npz" --no-measure \
    > "$OUT/math_cuda.log" 2>&1; echo "math rc $?"; tail -n 2 "$OUT/math_cuda.log"
timeout 150 python "$repo/examples/rows/run.py" --backend cuda --dtype bf16 f16 > "$OUT/rows_cuda.log" 2>&1
echo "rows rc $?"; tail -n 1 "$OUT/rows_cuda.log"
