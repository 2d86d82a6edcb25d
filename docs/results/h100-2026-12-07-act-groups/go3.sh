#!/usr/bin/env bash
# The session's last device call (little device time left), from the repository root, carried as go2.sh's: a
# frozen-BN fine-tuning step of MobileNetV2 (NCHW, fused, B = 128, bf16, eager and CUDA graph, ours against torch's in
# one process) with the rules' plans alone (RUST_KERNELS_TUNING=off: what CUDA-graph capture, torch.compile tracing
# and untimed keys get), this commit's package and old_python's (5f4d564: the split kernel through the activation).
#   bash go3.sh [EACH_S]
set -uo pipefail
each=${1:-90}
repo=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
mkdir -p /tmp/rkc && xz -dc rkc.tar.xz | tar xf - -C /tmp/rkc
export RUST_KERNELS_CACHE_DIR=/tmp/rkc RUST_KERNELS_TUNING=off
for side in python old_python; do
    PYTHONPATH=$repo/$side timeout $(( each + 40 )) python -m rust_kernels bench --models mobilenet_v2 --batch 128 \
        --bn frozen --dtype bf16 --fuse --modes eager graph --profile-steps 0 --budget "$each" --out "$OUT/$side" \
        > "$OUT/$side.log" 2>&1
    echo "$side rc $? at $SECONDS s"; grep -A 8 "^model " "$OUT/$side.log" | cut -c1-150
done
(cd "$OUT" && tar czf /tmp/out.tgz --exclude=gpu.txt . && find . -mindepth 1 ! -name gpu.txt -delete && mv /tmp/out.tgz .)
