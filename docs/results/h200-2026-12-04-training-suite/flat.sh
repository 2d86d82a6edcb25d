#!/usr/bin/env bash
# On the H200, from the repository root, with the sm_90 wheel of the FLAT commit in whl_carry/whl.tar.xz: the GPU
# cross-check of every check case launching a FLAT kernel, the A/B against one element at a time, the autotuner on
# the suite shapes whose rule now launches FLAT (exported), then ours vs eager vs torch.compile on them.
set -uo pipefail
here=$PWD/docs/results/h200-2026-12-04-training-suite
bash "$here/install_wheel.sh"
cd /tmp || exit 1
timeout 150 python "$here/check_flat.py" > "$OUT/check_flat.log" 2>&1
echo "check rc $?"; grep -E "FAIL|passed|cases" "$OUT/check_flat.log" | tail -n 12
timeout 90 python "$here/ab_flat.py" 128x96x35x35 32x32x149x149 128x32x149x149 32x80x73x73 128x192x17x17 \
    128x384x17x17 32x192x71x71 64x1280x3x3 128x2048x7x7 32x768x17x17 > "$OUT/ab_flat.log" 2>&1
echo "ab rc $?"; cat "$OUT/ab_flat.log" | tail -n 24
families=(batch_norm_2d_training batch_norm_2d_training_relu batch_norm_2d_training_add_relu)
timeout 160 env -u RUST_KERNELS_QUIET python -m rust_kernels tune --op "${families[@]}" \
    --shapes "$here/flat_two_launch_shapes.txt" --budget 120 --export "$OUT/tune_flat.json.gz" > "$OUT/tune_flat.log" 2>&1
echo "tune rc $?"; tail -c 500 "$OUT/tune_flat.log"
timeout 160 python -m rust_kernels bench --family batch_norm_2d_training batch_norm_2d_training_relu \
    --shapes $(tr '\n' ' ' < "$here/flat_two_launch_shapes.txt") --dtype bf16-f32 f32 --compile-every 3 --skip-launch \
    --budget 100 --out "$OUT/bench_flat" > "$OUT/bench_flat.log" 2>&1
echo "bench rc $?"; grep -E "fraction of bound" "$OUT/bench_flat.log"
