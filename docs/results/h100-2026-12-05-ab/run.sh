#!/usr/bin/env bash
# On the GPU machine, from the repository root, with whl_carry/{whl.tar.xz,rows.tgz} (build.sh): the ResNet-50 and
# MobileNetV2 channels_last training steps with the persistent kernels among the autotuner's candidates and
# without (RUST_KERNELS_PERSISTENT=1 / 0, one process each, both against torch), then the row kernels' GPU checks in
# every dtype and ab.py (row::Tile against row::PackedTile in the norms). Rows first, then CUDA-graph steps at B=32
# only (GPU time, not the host's; the layers the persistent kernels fit): the session had 500 s of device time left.
set -uo pipefail
repo=$PWD
here=$repo/docs/results/h100-2026-12-05-ab
nvidia-smi --query-gpu=name --format=csv,noheader
bash docs/results/h200-2026-12-04-training-suite/install_wheel.sh
mkdir -p /tmp/rkc2 && tar xzf whl_carry/rows.tgz -C /tmp/rkc2
cd "$repo" || exit 1
export PYTHONPATH=$repo/python RUST_KERNELS_CACHE_DIR=/tmp/rkc2 RUST_KERNELS_QUIET=1
timeout 60 python examples/rows/run.py --backend cuda > "$OUT/rows_check.log" 2>&1
echo "rows check rc $?"; tail -n 1 "$OUT/rows_check.log"
timeout 90 python "$here/ab.py" time > "$OUT/ab.log" 2>&1; echo "ab rc $?"; cat "$OUT/ab.log"
unset PYTHONPATH RUST_KERNELS_CACHE_DIR RUST_KERNELS_QUIET  # the installed wheel from here
cd /tmp || exit 1
for persistent in 0 1; do
    RUST_KERNELS_PERSISTENT=$persistent timeout 90 python -m rust_kernels bench --models resnet50 mobilenet_v2 \
        --batch 32 --bn train --memory-format channels_last --fuse --modes graph \
        --out "$OUT/models_persistent$persistent" --budget 60 > "$OUT/models_persistent$persistent.log" 2>&1
    echo "models persistent=$persistent rc $?"; grep -A12 "^model  " "$OUT/models_persistent$persistent.log"
done
