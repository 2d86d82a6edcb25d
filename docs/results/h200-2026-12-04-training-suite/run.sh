#!/usr/bin/env bash
# On the H200, from the repository root, with the sm_90 wheel of this commit in whl_carry/whl.tar.xz: (1) the autotuner on the
# 43 suite shapes whose cases 12-04's runs left untimed (untimed_shapes.txt), exporting the entries; (2) the training
# ops over the shape suite, NCHW and channels_last, f32 and bf16 with f32 parameters, ours vs eager vs torch.compile
# vs the bound in one process.
set -uo pipefail
bash "$PWD/docs/results/h200-2026-12-04-training-suite/install_wheel.sh"
here=$PWD/docs/results/h200-2026-12-04-training-suite
cd /tmp || exit 1  # the installed package, not the checkout's
families=(batch_norm_2d_training_channels_last batch_norm_2d_training_relu_channels_last
          batch_norm_2d_training_add_relu_channels_last batch_norm_2d_training_add_relu)
timeout $(( ${TUNE_BUDGET:-100} + 40 )) env -u RUST_KERNELS_QUIET python -m rust_kernels tune --op "${families[@]}" \
    --shapes "$here/untimed_shapes.txt" --budget "${TUNE_BUDGET:-100}" --export "$OUT/tune.json.gz" > "$OUT/tune.log" 2>&1
echo "tune rc $?"; tail -c 400 "$OUT/tune.log"
timeout $(( ${BENCH_BUDGET:-190} + 60 )) python -m rust_kernels bench --suite --family batch_norm_2d_training \
    batch_norm_2d_training_channels_last --dtype bf16-f32 f32 --compile-every 4 --skip-launch \
    --budget "${BENCH_BUDGET:-190}" --out "$OUT/bench" > "$OUT/bench.log" 2>&1
echo "bench rc $?"; tail -n 30 "$OUT/bench.log"
