#!/usr/bin/env bash
# On the H200 with the sm_90 wheel in whl_carry/whl.tar.xz: kernel_times.py over the weakest classes of bench_suite.csv.
set -uo pipefail
here=$PWD/docs/results/h200-2026-12-04-training-suite
bash "$here/install_wheel.sh"
cd /tmp || exit 1
T=batch_norm_2d_training
C=batch_norm_2d_training_channels_last
timeout 300 python "$here/kernel_times.py" "$C 32x112x14x14 f32" "$C 32x112x14x14 bf16-f32" "$C 1x96x56x56 f32" \
  "$C 128x320x8x8 bf16-f32" "$C 32x672x7x7 f32" "$C 1x256x56x56 bf16-f32" "$C 128x96x35x35 bf16-f32" \
  "$T 128x672x7x7 bf16-f32" "$T 32x2048x7x7 bf16-f32" "$T 128x96x35x35 bf16-f32" "$T 128x96x35x35 f32" \
  "$T 32x32x149x149 bf16-f32" "$T 1024x2048x1x1 bf16-f32" "$T 32x672x7x7 f32" > "$OUT/kernel_times.log" 2>&1
echo "kernel_times rc $?"; cat "$OUT/kernel_times.log" | cut -c1-150 | head -400
