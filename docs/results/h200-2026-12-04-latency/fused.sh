#!/usr/bin/env bash
# On the H200, from the repository root, with the sm_90 wheel in whl_carry/whl.tar.xz (the one-launch NCHW kernels
# loading their per-channel values before the walk): the GPU cross-check of every check case launching them, ncu over
# the shapes of latency.sh (to set beside its run before the change), then the tuner on the suite shapes where they
# are candidates (fused_shapes.txt, in the suite's spread order), exported.
set -uo pipefail
here=$PWD/docs/results/h200-2026-12-04-latency
bash docs/results/h200-2026-12-04-training-suite/install_wheel.sh
cd /tmp || exit 1
timeout 120 python "$here/check_fused.py" > "$OUT/check_fused.log" 2>&1
echo "check rc $?"; grep -E "FAIL|passed|cases" "$OUT/check_fused.log" | tail -n 8
cd - > /dev/null && OUT=$OUT/after bash -c 'mkdir -p $OUT && bash docs/results/h200-2026-12-04-latency/latency.sh' \
    | grep -v "^    .*at::\|^  torch" | head -n 40
cd /tmp || exit 1
families=(batch_norm_2d_training batch_norm_2d_training_relu batch_norm_2d_training_add_relu)
timeout 280 env -u RUST_KERNELS_QUIET python -m rust_kernels tune --op "${families[@]}" \
    --shapes "$here/fused_shapes.txt" --budget 250 --export "$OUT/tune_fused.json.gz" > "$OUT/tune_fused.log" 2>&1
echo "tune rc $?"; tail -c 400 "$OUT/tune_fused.log"
