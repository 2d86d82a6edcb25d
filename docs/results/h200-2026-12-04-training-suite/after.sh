#!/usr/bin/env bash
# On the H200, from the repository root, with the sm_90 wheel of 78c70cf (FLAT, the merged table) in
# whl_carry/whl.tar.xz: the NCHW training ops over the suite again (the same spread order and budget as run.sh's
# bench), then the 7x7 many-channel shapes where run.sh's bench found ours below torch.compile, compile on each.
set -uo pipefail
here=$PWD/docs/results/h200-2026-12-04-training-suite
bash "$here/install_wheel.sh"
cd /tmp || exit 1
timeout 250 python -m rust_kernels bench --suite --family batch_norm_2d_training batch_norm_2d_training_relu \
    --dtype bf16-f32 f32 --compile-every 4 --skip-launch --budget 190 --out "$OUT/bench_after" > "$OUT/bench_after.log" 2>&1
echo "bench rc $?"; grep -E "fraction of bound" "$OUT/bench_after.log"
timeout 150 python -m rust_kernels bench --family batch_norm_2d_training --shapes 128x672x7x7 128x736x7x7 \
    128x864x7x7 128x992x7x7 32x672x7x7 32x2048x7x7 128x1280x7x7 1x1024x7x7 --dtype bf16-f32 f32 --skip-launch \
    --budget 110 --out "$OUT/bench_7x7" > "$OUT/bench_7x7.log" 2>&1
echo "bench 7x7 rc $?"; grep -E "fraction of bound|\] batch_norm" "$OUT/bench_7x7.log" | cut -c1-170
