#!/usr/bin/env bash
# On the H200, from the repository root, with rkc.tgz from build.sh carried: the row kernels' GPU checks in every
# dtype, ab.py (before / after in one process), the benchmark against PyTorch eager, torch.compile and a copy, and
# the math library's errors on the GPU (erf_fast is new), its outputs saved for `ulp.py --load` here.
set -uo pipefail
mkdir -p rkc && tar xzf rkc.tgz -C rkc
export PYTHONPATH=$PWD/python RUST_KERNELS_CACHE_DIR=$PWD/rkc RUST_KERNELS_QUIET=1
here=docs/results/h200-2026-12-05-rows-erf-fast
timeout 120 python examples/rows/run.py --backend cuda > "$OUT/rows_check.log" 2>&1
echo "check rc $?"; tail -n 1 "$OUT/rows_check.log"
timeout 150 python $here/ab.py time > "$OUT/ab.log" 2>&1
echo "ab rc $?"; cat "$OUT/ab.log"
timeout 300 python examples/rows/run.py --backend cuda --dtype f32 bf16 --bench "$OUT/rows.csv" > "$OUT/rows_bench.log" 2>&1
echo "bench rc $?"; tail -n 10 "$OUT/rows_bench.log"
timeout 120 python examples/math/ulp.py --backend cuda --n 16384 --save "$OUT/math_cuda.npz" --no-measure > "$OUT/ulp.log" 2>&1
echo "ulp rc $?"
