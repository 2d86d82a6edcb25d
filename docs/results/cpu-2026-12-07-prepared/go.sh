#!/usr/bin/env bash
# The next device call (prepared on 12-07, third session; not run: no device came), from the repository root with
# rkc.tar.xz (build.py) and the native extension carried.
#   bash go.sh [TOTAL_S]
# On an H200: ../h100-2026-12-07-checks/go.sh's re-tune (the channels_last training families' persistent-kernel
# entries, the eval forwards' _packed kernels, then the rest of 12-07's list), exported for
# scripts/merge_tuning_table.py.
# Elsewhere: the GPU check of the eval-mode fused ops (BN + activation, BN + add + ReLU; both layouts, every dtype key
# and activation), which no call had finished; then the eval forwards (the _packed path) against PyTorch and
# torch.compile, with their host cost per call; then a frozen-BN ResNet-50 step kept in channels_last.
set -uo pipefail
total=${1:-560}
source scripts/device_call.sh
device_begin "$total"
if device_on_h200; then
    exec bash docs/results/h100-2026-12-07-checks/go.sh "$total"
fi
device_step check_eval_fused $(( total * 45 / 100 )) check --family batch_norm_2d_act_eval_forward \
    batch_norm_2d_act_eval_backward batch_norm_2d_add_relu_eval_forward batch_norm_2d_add_relu_eval_backward
device_step bench_eval_forward $(( total * 17 / 100 )) bench --skip-launch --dtype f32 bf16-f32 --shapes 8x32x8x8 \
    32x256x56x56 128x64x112x112 32x512x28x28 128x2048x7x7 --family batch_norm_2d_eval_forward_channels_last \
    batch_norm_2d_act_eval_forward_channels_last batch_norm_2d_add_relu_eval_forward_channels_last --out "$OUT/bench"
device_step models $(( total - SECONDS - 20 )) bench --models resnet50 --bn frozen --memory-format channels_last \
    --batch 64 --modes eager graph --dtype bf16 --profile-steps 0 --budget $(( total - SECONDS - 60 )) \
    --out "$OUT/models"
device_end
