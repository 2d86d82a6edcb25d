#!/usr/bin/env bash
# On the H200, from the repository root, with the sm_90 wheel of the commit: the NCHW training ops over the suite,
# the same command (spread order, budget) as ../h200-2026-12-04-training-suite/after.sh's first bench.
set -uo pipefail
bash docs/results/h200-2026-12-04-training-suite/install_wheel.sh
cd /tmp || exit 1
timeout 250 python -m rust_kernels bench --suite --family batch_norm_2d_training batch_norm_2d_training_relu \
    --dtype bf16-f32 f32 --compile-every 4 --skip-launch --budget 190 --out "$OUT/bench_suite" > "$OUT/bench_suite.log" 2>&1
echo "bench rc $?"; grep -E "fraction of bound" "$OUT/bench_suite.log"
