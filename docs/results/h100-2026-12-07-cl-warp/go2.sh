#!/usr/bin/env bash
# The second device call, as go.sh (rkc.tar.xz now also holding build.py's kernels: the channels_last warp kernels
# in every dtype key). On an H200: ../h100-2026-12-07-rules/go.sh's re-tune of the shipped table, then `tune` of
# the channels_last training families over shapes.txt. Elsewhere:
#   1. `check` (GPU, against float64) and `sanitize` (memcheck, initcheck) of the channels_last warp kernels;
#   2. `bench` of the channels_last training family over the 71 suite shapes where they are candidates
#      (suite_small.txt), tuned on first use, torch.compile on every second;
#   3. training steps at batch 4 (bf16 autocast, channels_last, BN training, CUDA graphs): ResNet-50 and
#      MobileNetV2, ours against torch's in one process.
#   bash go2.sh [TOTAL_S]
set -uo pipefail
total=${1:-570}
repo=$PWD; here=$repo/docs/results/h100-2026-12-07-cl-warp
left() { echo $(( total - SECONDS )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
mkdir -p /tmp/rkc && xz -dc rkc.tar.xz | tar xf - -C /tmp/rkc
export RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$repo/python
if grep -q H200 "$OUT/gpu.txt"; then
    bash "$repo/docs/results/h100-2026-12-07-rules/go.sh" $(( total - 100 ))
    timeout $(( $(left) - 10 )) python -m rust_kernels tune --op batch_norm_2d_training_channels_last \
        batch_norm_2d_training_relu_channels_last --shapes "$here/shapes.txt" --budget $(( $(left) - 40 )) \
        --export "$OUT/tune_cl_warp_h200.json.gz" > "$OUT/tune_cl_warp_h200.log" 2>&1
    echo "tune rc $? at $SECONDS s"; tail -c 300 "$OUT/tune_cl_warp_h200.log"
    exit 0
fi
NEW="batch_norm_2d_warp_forward_channels_last batch_norm_2d_warp_forward_channels_last_act
     batch_norm_2d_warp_backward_channels_last batch_norm_2d_warp_backward_channels_last_act"
timeout 120 python -m rust_kernels check --kernel $NEW > "$OUT/check.log" 2>&1
echo "check rc $? at $SECONDS s"; tail -3 "$OUT/check.log"
timeout 100 python -m rust_kernels sanitize --tools memcheck initcheck --kernel $NEW --timeout 45 --out "$OUT/sanitize" \
    > "$OUT/sanitize.log" 2>&1
echo "sanitize rc $? at $SECONDS s"; tail -4 "$OUT/sanitize.log"
timeout $(( $(left) * 60 / 100 )) python -m rust_kernels bench --family batch_norm_2d_training_channels_last \
    --dtype bf16-f32 f32 --shapes $(cat "$here/suite_small.txt") --compile-every 2 --skip-launch \
    --out "$OUT/bench_small" > "$OUT/bench_small.log" 2>&1
echo "bench rc $? at $SECONDS s"; grep -v "^\[" "$OUT/bench_small.log" | cut -c1-250 | tail -4
budget=$(( $(left) - 50 ))
timeout $(( budget + 30 )) python -m rust_kernels bench --models resnet50 mobilenet_v2 --batch 4 --bn train \
    --memory-format channels_last --dtype bf16 --fuse --modes graph --profile-steps 0 --budget "$budget" \
    --out "$OUT/models" > "$OUT/models.log" 2>&1
echo "models rc $? at $SECONDS s"; grep -A 10 "^model " "$OUT/models.log" | cut -c1-150
(cd "$OUT" && tar czf /tmp/out.tgz --exclude=gpu.txt . && find . -mindepth 1 ! -name gpu.txt -delete &&
    mv /tmp/out.tgz .)
