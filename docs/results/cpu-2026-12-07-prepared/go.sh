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
repo=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
if grep -q H200 "$OUT/gpu.txt"; then
    exec bash "$repo/docs/results/h100-2026-12-07-checks/go.sh" "$total"
fi
mkdir -p /tmp/rkc && xz -dc rkc.tar.xz | tar xf - -C /tmp/rkc
export RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$repo/python
echo "unpacked at $SECONDS s"
step() {  # NAME SECONDS COMMAND...
    local name=$1 s=$2; shift 2
    (( s > 10 )) || { echo "$name skipped"; return; }
    timeout "$s" python -m rust_kernels "$@" > "$OUT/$name.log" 2>&1
    echo "$name rc $? at $SECONDS s"; tr '\r' '\n' < "$OUT/$name.log" | grep -v "^\[" | tail -4
}
step check_eval_fused $(( total * 45 / 100 )) check --family batch_norm_2d_act_eval_forward batch_norm_2d_act_eval_backward \
    batch_norm_2d_add_relu_eval_forward batch_norm_2d_add_relu_eval_backward
step bench_eval_forward $(( total * 17 / 100 )) bench --skip-launch --dtype f32 bf16-f32 --shapes 8x32x8x8 32x256x56x56 \
    128x64x112x112 32x512x28x28 128x2048x7x7 --family batch_norm_2d_eval_forward_channels_last \
    batch_norm_2d_act_eval_forward_channels_last batch_norm_2d_add_relu_eval_forward_channels_last --out "$OUT/bench"
step models $(( total - SECONDS - 20 )) bench --models resnet50 --bn frozen --memory-format channels_last \
    --batch 64 --modes eager graph --dtype bf16 --profile-steps 0 --budget $(( total - SECONDS - 60 )) --out "$OUT/models"
(cd "$OUT" && tar czf /tmp/out.tgz --exclude=./gpu.txt . && rm -rf -- ./*.log ./bench ./models && mv /tmp/out.tgz .)
