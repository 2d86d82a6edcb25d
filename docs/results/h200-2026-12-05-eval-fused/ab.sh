#!/usr/bin/env bash
# On the H200, with the sm_90 wheel (whl_carry/whl.tar.xz, installed if it is not) and, per side to compare with it,
# its channels_last template and a cache of its kernels (side_cache.py, built for sm_90): B = branch
# cl-shuffle-rows (whl_carry/channels_last.rs.j2, br.tar.xz), B2 = cl-merge-wide (channels_last_b2.rs.j2,
# br2.tar.xz). The channels_last
# training and eval-backward ops over the suite's weak shapes with the rules' plans (RUST_KERNELS_TUNING=off):
# A, B, B2, then again, in turn on one warm GPU (a side: its template in the installed package, its cache as
# RUST_KERNELS_CACHE_DIR); ab_ratio.py prints each side's time over A's.
set -uo pipefail
[ -d /tmp/wheel ] || bash docs/results/h200-2026-12-04-training-suite/install_wheel.sh
repo=$PWD
site=$(cd /tmp && python -c "import os, rust_kernels; print(os.path.dirname(rust_kernels.__file__))")
tpl=$site/_data/codegen/batch_norm/channels_last.rs.j2
cp "$tpl" /tmp/cl_main.rs.j2
mkdir -p /tmp/cache_B /tmp/cache_B2 && tar xJf whl_carry/br.tar.xz -C /tmp/cache_B && tar xJf whl_carry/br2.tar.xz -C /tmp/cache_B2
declare -A template=([A]=/tmp/cl_main.rs.j2 [B]=$repo/whl_carry/channels_last.rs.j2 [B2]=$repo/whl_carry/channels_last_b2.rs.j2)
declare -A cache=([A]=$HOME/.cache/rust_kernels [B]=/tmp/cache_B [B2]=/tmp/cache_B2)
shapes=(1x256x56x56 1x96x56x56 32x112x14x14 32x200x14x14 32x320x8x8 128x320x8x8 1024x2048x1x1 32x256x28x28
        128x256x28x28 128x64x112x112 32x32x149x149 1x3x1024x1024)
cd /tmp || exit 1
for round in 1 2; do
  for side in A B B2; do
    cp "${template[$side]}" "$tpl"
    RUST_KERNELS_TUNING=off RUST_KERNELS_CACHE_DIR=${cache[$side]} timeout 60 python -m rust_kernels bench \
        --family batch_norm_2d_training_channels_last batch_norm_2d_training_relu_channels_last \
        batch_norm_2d_eval_backward_channels_last --dtype f32 bf16-f32 --shapes "${shapes[@]}" \
        --compile-every 0 --skip-launch --reps 30 --out "$OUT/ab_${side}_r$round" > "$OUT/ab_${side}_r$round.log" 2>&1
    echo "ab $side round $round rc $?"; grep -i "error\|n/a" "$OUT/ab_${side}_r$round.log" | head -3
  done
done
cp /tmp/cl_main.rs.j2 "$tpl"
python "$repo/docs/results/h200-2026-12-05-eval-fused/ab_ratio.py" "$OUT" B B2 > "$OUT/ab_ratio.log"
grep "geomean" "$OUT/ab_ratio.log"
