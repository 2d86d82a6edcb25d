#!/usr/bin/env bash
# On the GPU, from the repository root, with rkc.tgz carried (built here: `python sweep.py build` and
# ../h200-2026-12-04-rows-fast-math/prebuild.py into it): the row kernels' GPU checks against float64 in every
# dtype (the new ROWS plans and bf16's exact GELU among them), then the plan sweep.
set -uo pipefail
mkdir -p rkc && tar xzf rkc.tgz -C rkc
export PYTHONPATH=$PWD/python RUST_KERNELS_CACHE_DIR=$PWD/rkc RUST_KERNELS_QUIET=1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 150 python examples/rows/run.py --backend cuda > "$OUT/rows_check.log" 2>&1
echo "check rc $?"; grep -c PASS "$OUT/rows_check.log"; grep FAIL "$OUT/rows_check.log"; tail -n 1 "$OUT/rows_check.log"
timeout 300 python docs/results/h200-2026-12-06-rows-plans/sweep.py time > "$OUT/sweep.log" 2>&1
echo "sweep rc $?"; cat "$OUT/sweep.log"
