#!/usr/bin/env bash
# On the H200, after tune.sh (the wheel installed): the ResNet-50 and MobileNetV2 training steps, bf16, B = 128,
# channels_last, BN in training mode, eager and under a CUDA graph, ours beside torch in one process.
set -uo pipefail
cd /tmp || exit 1
timeout 200 python -m rust_kernels bench --models resnet50 mobilenet_v2 --bn train --fuse --batch 128 --dtype bf16 \
    --modes eager graph --memory-format channels_last --budget 150 --out "$OUT/models" > "$OUT/models_cl.log" 2>&1
echo "models rc $?"
grep -A12 "kernels counted as BN, ours" "$OUT/models_cl.log" | head -14; grep -A5 "^model  " "$OUT/models_cl.log"
