#!/usr/bin/env bash
# The session's second device call, from the repository root, with rkc.tar.xz (build.py) and the native extension
# carried, as go.sh: model steps, ours against torch's in one process (`bench --models`, tuning on: the H100 has no
# shipped table, so each key is tuned on first use):
#   ResNet-50 and MobileNetV2 training, channels_last, B = 32, 64 and 128, bf16 and f32, fused, eager and CUDA graph;
#   the channels_last training op on two shapes whose backward the cooperative kernels now fit (tuned), against torch;
#   frozen-BN ResNet-50 (eval-mode BN in a training step, NCHW: the eval backward's grouped kernel), B = 64 and 128;
#   the training cells under CUDA graphs without the persistent and cooperative kernels (RUST_KERNELS_PERSISTENT=0).
# On an H200 first the shipped table's missing entries (`tune`, exported): the eval backward's grouped kernel over the
# suite shapes it fits (../h100-2026-12-07-eval-groups/shapes.txt), the cooperative kernels and the packed eval forward
# (shapes_coop.txt: keys.py of ../h100-2026-12-06-cooperative/ at this commit's 40 MiB bound; its shapes_eval.txt),
# TUNE_S in all.
#   bash go2.sh [TOTAL_S] [TUNE_S]
set -uo pipefail
total=${1:-500}; tune_s=${2:-200}
repo=$PWD
mkdir -p /tmp/rkc && xz -dc rkc.tar.xz | tar xf - -C /tmp/rkc
export RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$repo/python
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
left() { echo $(( total - SECONDS )); }
tune() {  # NAME SHAPES BUDGET_S OPS...
    local name=$1 shapes=$2 budget=$3; shift 3
    timeout $(( budget + 40 )) python -m rust_kernels tune --op "$@" --shapes "$shapes" --budget "$budget" \
        --export "$OUT/$name.json.gz" > "$OUT/$name.log" 2>&1
    echo "$name rc $? at $SECONDS s"; tail -c 500 "$OUT/$name.log"; echo
}
if grep -q H200 "$OUT/gpu.txt"; then
    coop=$repo/docs/results/h100-2026-12-06-cooperative
    tune tune_groups $repo/docs/results/h100-2026-12-07-eval-groups/shapes.txt $(( tune_s * 35 / 100 )) \
        batch_norm_2d_nchw_backward
    tune tune $repo/docs/results/h100-2026-12-07-e2e/shapes_coop.txt $(( tune_s * 45 / 100 )) \
        batch_norm_2d_training_channels_last \
        batch_norm_2d_training_relu_channels_last batch_norm_2d_training_add_relu_channels_last
    tune tune_eval $coop/shapes_eval.txt $(( tune_s * 20 / 100 )) batch_norm_2d_nchw_forward_inference
fi
models() {  # OUT_NAME BUDGET_S ARGS...
    local name=$1 budget=$2; shift 2
    timeout $(( budget + 30 )) python -m rust_kernels bench --models "$@" --profile-steps 0 --budget "$budget" \
        --out "$OUT/$name" > "$OUT/$name.log" 2>&1
    echo "$name rc $? at $SECONDS s"; grep -A 26 "^model " "$OUT/$name.log" | cut -c1-150
}
models train_cl $(( $(left) * 40 / 100 )) resnet50 mobilenet_v2 --batch 32 64 128 --bn train \
    --memory-format channels_last --dtype bf16 f32 --fuse --modes eager graph
timeout 60 python -m rust_kernels bench --family batch_norm_2d_training_channels_last --shapes 32x128x28x28 \
    32x384x28x28 --dtype bf16-f32 f32 --skip-launch --compile-every 0 --reps 20 --out "$OUT/ops" > "$OUT/ops.log" 2>&1
echo "ops rc $? at $SECONDS s"; grep -B2 -A6 "GPU µs" "$OUT/ops.log" | cut -c1-200
models frozen_nchw $(( $(left) * 45 / 100 )) resnet50 --batch 64 128 --bn frozen --dtype bf16 f32 --modes eager graph
RUST_KERNELS_PERSISTENT=0 models train_cl_no_persistent $(( $(left) - 40 )) resnet50 mobilenet_v2 \
    --batch 32 64 128 --bn train --memory-format channels_last --dtype bf16 f32 --fuse --modes graph
# one archive (the device returns a few files only)
(cd "$OUT" && tar czf /tmp/out.tgz --exclude=gpu.txt . && find . -mindepth 1 ! -name gpu.txt -delete && mv /tmp/out.tgz .)
