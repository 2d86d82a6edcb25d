#!/usr/bin/env bash
# On the H200 (the wheel installed): one case of side B (cl-shuffle-rows' channels_last template, its carried cache
# whl_carry/br.tar.xz), which made no progress in 60 s in ab.sh (12-05): under a 25 s limit that then aborts Python
# with faulthandler on, so that the log shows where every thread was waiting.
set -uo pipefail
[ -d /tmp/wheel ] || bash docs/results/h200-2026-12-04-training-suite/install_wheel.sh
repo=$PWD
site=$(cd /tmp && python -c "import os, rust_kernels; print(os.path.dirname(rust_kernels.__file__))")
tpl=$site/_data/codegen/batch_norm/channels_last.rs.j2
cp "$tpl" /tmp/cl_main.rs.j2 && cp "$repo/whl_carry/channels_last.rs.j2" "$tpl"
mkdir -p /tmp/cache_B && tar xJf whl_carry/br.tar.xz -C /tmp/cache_B
cd /tmp || exit 1
RUST_KERNELS_TUNING=off RUST_KERNELS_CACHE_DIR=/tmp/cache_B timeout -s ABRT 25 python -X faulthandler -m rust_kernels \
    bench --family batch_norm_2d_training_channels_last --dtype f32 --shapes 32x256x28x28 --compile-every 0 \
    --skip-launch --reps 20 --host-calls 10 --out "$OUT/probe_b" > "$OUT/probe_b.log" 2>&1
echo "probe B rc $?"; tail -n 40 "$OUT/probe_b.log"
cp /tmp/cl_main.rs.j2 "$tpl"
