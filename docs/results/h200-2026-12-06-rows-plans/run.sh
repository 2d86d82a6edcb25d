#!/usr/bin/env bash
# On the GPU, from the repository root, with rkc.tgz carried (built here: ../h200-2026-12-04-rows-fast-math/
# prebuild.py, every plan of examples/rows/run.py's checks and benchmark): the row kernels' GPU checks against
# float64 in every dtype, the benchmark against PyTorch eager, torch.compile and a copy with run.plan's plans, then
# the plan sweep (sweep.py build into the same cache).
set -uo pipefail
mkdir -p rkc && tar xzf rkc.tgz -C rkc
export PYTHONPATH=$PWD/python RUST_KERNELS_CACHE_DIR=$PWD/rkc RUST_KERNELS_QUIET=1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 150 python examples/rows/run.py --backend cuda > "$OUT/rows_check.log" 2>&1
echo "check rc $?"; grep -c PASS "$OUT/rows_check.log"; grep FAIL "$OUT/rows_check.log"; tail -n 1 "$OUT/rows_check.log"
timeout 400 python examples/rows/run.py --backend cuda --dtype f32 bf16 --bench "$OUT/rows.csv" > "$OUT/rows_bench.log" 2>&1
echo "bench rc $?"; tail -n 10 "$OUT/rows_bench.log"
timeout 200 python docs/results/h200-2026-12-06-rows-plans/sweep.py time > "$OUT/sweep.log" 2>&1
echo "sweep rc $?"
