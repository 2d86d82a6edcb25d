#!/usr/bin/env bash
# On the H200, from the repository root, with the sm_90 wheel of the masked-reductions commit in
# whl_carry/whl.tar.xz: the autotuner on the rest of the suite shapes where FLAT is a candidate, exported; then ours
# (the tuned plans) vs eager vs torch.compile on the two-launch FLAT shapes.
set -uo pipefail
here=$PWD/docs/results/h200-2026-12-04-masked-reductions
suite=$PWD/docs/results/h200-2026-12-04-training-suite
bash "$suite/install_wheel.sh"
cd /tmp || exit 1
families=(batch_norm_2d_training batch_norm_2d_training_relu batch_norm_2d_training_add_relu)
timeout 300 env -u RUST_KERNELS_QUIET python -m rust_kernels tune --op "${families[@]}" \
    --shapes "$suite/flat_rest_shapes.txt" --budget 270 --export "$OUT/tune_masked_rest.json.gz" \
    > "$OUT/tune_masked_rest.log" 2>&1
echo "tune rc $?"; tail -c 400 "$OUT/tune_masked_rest.log"
timeout 170 python -m rust_kernels bench --family batch_norm_2d_training batch_norm_2d_training_relu \
    --shapes $(tr '\n' ' ' < "$suite/flat_two_launch_shapes.txt") --dtype bf16-f32 f32 --compile-every 3 --skip-launch \
    --budget 110 --out "$OUT/bench_masked" > "$OUT/bench_masked.log" 2>&1
echo "bench rc $?"; grep -E "fraction of bound" "$OUT/bench_masked.log"
