#!/usr/bin/env bash
# On the GPU, from the repository root, with every candidate's kernels of the NCHW training ops on the suite's batch-32
# shapes (and probe.py build's) in rkc_models.tgz: the model steps with the block kernels (the default since beb5640)
# and without them, tuning on (no shipped table on an H100: every key timed on its first call), B = 32, bf16
# autocast, NCHW, BN training, convert(fuse=True); each side its own process, torch's BN the anchor in each.
set -uo pipefail
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
mkdir -p /tmp/rkc && tar xzf rkc_models.tgz -C /tmp/rkc
export RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$PWD/python
for side in with without; do
    timeout 150 python docs/results/h100-2026-12-06-block/models.py $side --models resnet50 mobilenet_v2 --batch 32 \
        --bn train --dtype bf16 --fuse --modes graph eager --profile-steps 0 --out "$OUT/models_$side" --budget 115 \
        > "$OUT/models_$side.log" 2>&1
    echo "models $side rc $? at $SECONDS s"; tail -n 6 "$OUT/models_$side.log" | cut -c1-220
done
