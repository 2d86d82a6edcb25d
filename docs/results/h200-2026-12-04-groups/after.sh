#!/usr/bin/env bash
# On the H200, from the repository root, with the sm_90 wheel of the commit (the table with tune.sh's exports merged):
# the NCHW training ops over the suite (the same command, spread order and budget as ../h200-2026-12-04-latency/
# suite.sh), then ResNet-50 and MobileNetV2 training steps (B = 32 and 128, bf16 autocast, NCHW, CUDA graph).
set -uo pipefail
bash docs/results/h200-2026-12-04-training-suite/install_wheel.sh
cd /tmp || exit 1
timeout 250 python -m rust_kernels bench --suite --family batch_norm_2d_training batch_norm_2d_training_relu \
    --dtype bf16-f32 f32 --compile-every 4 --skip-launch --budget 190 --out "$OUT/bench_suite" > "$OUT/bench_suite.log" 2>&1
echo "bench rc $?"; grep -E "fraction of bound" "$OUT/bench_suite.log"
timeout 200 python -m rust_kernels bench --models resnet50 mobilenet_v2 --bn train --batch 32 128 --dtype bf16 \
    --modes graph --memory-format contiguous --budget 160 --out "$OUT/models" > "$OUT/models.log" 2>&1
echo "models rc $?"; grep -A8 "^model  " "$OUT/models.log"
