#!/usr/bin/env bash
# On the H200, from the repository root: the checkout's package (PYTHONPATH) with the kernels prebuild.py and
# sweep.py built here, tarred in rkc.tgz (the GPU machine has no Rust). The row kernels' checks in every dtype, the
# plan sweep, then the benchmark against PyTorch eager, torch.compile and a copy.
set -uo pipefail
mkdir -p rkc && tar xzf rkc.tgz -C rkc
export PYTHONPATH=$PWD/python RUST_KERNELS_CACHE_DIR=$PWD/rkc RUST_KERNELS_QUIET=1
here=docs/results/h200-2026-12-04-rows-fast-math
timeout 120 python examples/rows/run.py --backend cuda > "$OUT/rows_check.log" 2>&1
echo "check rc $?"; tail -n 1 "$OUT/rows_check.log"
[ "${SWEEP:-1}" = 1 ] && { timeout 200 python $here/sweep.py time > "$OUT/sweep.log" 2>&1; echo "sweep rc $?"; }
timeout 300 python examples/rows/run.py --backend cuda --dtype f32 bf16 --bench "$OUT/rows.csv" > "$OUT/rows_bench.log" 2>&1
echo "bench rc $?"; tail -n 10 "$OUT/rows_bench.log"
