#!/usr/bin/env bash
# The third device call, as go2.sh. On an H200: go2.sh's H200 branch. Elsewhere:
#   1. `tune` of the channels_last training families (plain and ReLU; f32, bf16 with f32 parameters) over
#      column_shapes.txt, the suite shapes whose backward rule width changed (column_changes.py), exported;
#   2. training steps, bf16 autocast, channels_last, BN training, CUDA graphs, `convert(fuse=True)`: ResNet-50 and
#      MobileNetV2 at batch 32, ours against torch's in one process (against ../h100-2026-12-07-e2e/'s).
#   bash go3.sh [TOTAL_S]
set -uo pipefail
total=${1:-400}
repo=$PWD; here=$repo/docs/results/h100-2026-12-07-cl-warp
left() { echo $(( total - SECONDS )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
if grep -q H200 "$OUT/gpu.txt"; then
    exec bash "$here/go2.sh" "$total"
fi
mkdir -p /tmp/rkc && xz -dc rkc.tar.xz | tar xf - -C /tmp/rkc
export RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$repo/python
budget=$(( $(left) * 45 / 100 ))
timeout $(( budget + 30 )) python -m rust_kernels tune --op batch_norm_2d_training_channels_last \
    batch_norm_2d_training_relu_channels_last --shapes "$here/column_shapes.txt" --budget "$budget" \
    --export "$OUT/tune_cols.json.gz" > "$OUT/tune_cols.log" 2>&1
echo "tune rc $? at $SECONDS s (budget $budget s)"; tail -c 300 "$OUT/tune_cols.log"; echo
budget=$(( $(left) - 45 ))
timeout $(( budget + 30 )) python -m rust_kernels bench --models resnet50 mobilenet_v2 --batch 32 --bn train \
    --memory-format channels_last --dtype bf16 --fuse --modes graph --profile-steps 0 --budget "$budget" \
    --out "$OUT/models32" > "$OUT/models32.log" 2>&1
echo "models rc $? at $SECONDS s"; grep -A 6 "^model " "$OUT/models32.log" | cut -c1-150
(cd "$OUT" && tar czf /tmp/out.tgz --exclude=gpu.txt . && find . -mindepth 1 ! -name gpu.txt -delete &&
    mv /tmp/out.tgz .)
