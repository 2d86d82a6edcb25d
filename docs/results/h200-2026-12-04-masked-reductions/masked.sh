#!/usr/bin/env bash
# On the H200, from the repository root, with the sm_90 wheel of the masked-reductions commit in
# whl_carry/whl.tar.xz: the GPU cross-check of every check case launching a kernel in training.FLAT (the elementwise
# launches over the flat tensor and now the reductions' masked packs), the A/B of the reductions (rows against
# masked packs), then the autotuner on the suite shapes where FLAT is a candidate (the two-launch ones), exported.
set -uo pipefail
here=$PWD/docs/results/h200-2026-12-04-masked-reductions
bash docs/results/h200-2026-12-04-training-suite/install_wheel.sh
cd /tmp || exit 1
timeout 170 python "$here/../h200-2026-12-04-training-suite/check_flat.py" > "$OUT/check_masked.log" 2>&1
echo "check rc $?"; grep -E "FAIL|passed|cases" "$OUT/check_masked.log" | tail -n 12
timeout 100 python "$here/ab_masked.py" 128x96x35x35 32x32x149x149 128x32x149x149 32x80x73x73 128x192x17x17 \
    128x384x17x17 32x192x71x71 64x1280x3x3 128x2048x7x7 32x768x17x17 8x512x7x7 > "$OUT/ab_masked.log" 2>&1
echo "ab rc $?"; tail -n 24 "$OUT/ab_masked.log"
families=(batch_norm_2d_training batch_norm_2d_training_relu batch_norm_2d_training_add_relu)
timeout 200 env -u RUST_KERNELS_QUIET python -m rust_kernels tune --op "${families[@]}" \
    --shapes "$here/../h200-2026-12-04-training-suite/flat_two_launch_shapes.txt" --budget 170 \
    --export "$OUT/tune_masked.json.gz" > "$OUT/tune_masked.log" 2>&1
echo "tune rc $?"; tail -c 600 "$OUT/tune_masked.log"
