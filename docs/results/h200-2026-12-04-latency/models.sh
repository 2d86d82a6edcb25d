#!/usr/bin/env bash
# On the H200, from the repository root, with the sm_90 wheel of the commit: ResNet-50 and MobileNetV2 training
# steps at batch 32 (their late layers are small NCHW shapes the one-launch kernels serve), bf16 autocast, NCHW, BN
# in training mode, ours vs torch under a CUDA graph.
set -uo pipefail
bash docs/results/h200-2026-12-04-training-suite/install_wheel.sh
cd /tmp || exit 1
timeout 330 python -m rust_kernels bench --models resnet50 mobilenet_v2 --bn train --batch 32 --dtype bf16 \
    --modes graph --memory-format contiguous --budget 280 --out "$OUT/models" > "$OUT/models.log" 2>&1
echo "models rc $?"
grep -A12 "kernels counted as BN, ours" "$OUT/models.log" | head -30; grep -A6 "^model  " "$OUT/models.log"
tail -n 4 "$OUT/models.log"
