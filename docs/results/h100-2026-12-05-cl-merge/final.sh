#!/usr/bin/env bash
# On the GPU (the wheel installed if it is not): where the first training step's seconds go (first_call.py), then a
# ResNet-50 training step, bf16 autocast, channels_last, B = 64, convert(fuse=True) against torch, the tuner as a user
# gets it (on: keys this GPU has not timed are tuned at their first call).
set -uo pipefail
[ -d /tmp/wheel ] || bash docs/results/h200-2026-12-04-training-suite/install_wheel.sh
here=$PWD/docs/results/h100-2026-12-05-cl-merge
cd /tmp || exit 1
RUST_KERNELS_TUNING=off timeout 90 python "$here/first_call.py" > "$OUT/first_call.log" 2>&1
echo "first_call rc $?"; head -n 60 "$OUT/first_call.log"
timeout 280 python -m rust_kernels bench --models resnet50 --batch 64 --dtype bf16 --modes eager --bn train \
    --memory-format channels_last --fuse --steps 10 --warmup 3 --out "$OUT/models" > "$OUT/models.log" 2>&1
echo "models rc $?"; tail -n 25 "$OUT/models.log"
