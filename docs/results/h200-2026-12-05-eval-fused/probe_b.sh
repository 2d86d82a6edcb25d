#!/usr/bin/env bash
# On the H200 (the wheel installed): one case of side B (cl-shuffle-rows' channels_last template, its carried cache
# whl_carry/br.tar.xz), which made no progress in 60 s in ab.sh (12-05). 12-05's run sent SIGABRT after 25 s and got
# no faulthandler dump; this one first shows whether a Rust toolchain is found (the carried kernels' path asks), then
# has faulthandler's own watchdog thread print every thread's stack after 20 s and exit (no signal needed).
set -uo pipefail
[ -d /tmp/wheel ] || bash docs/results/h200-2026-12-04-training-suite/install_wheel.sh
repo=$PWD
site=$(cd /tmp && python -c "import os, rust_kernels; print(os.path.dirname(rust_kernels.__file__))")
tpl=$site/_data/codegen/batch_norm/channels_last.rs.j2
cp "$tpl" /tmp/cl_main.rs.j2 && cp "$repo/whl_carry/channels_last.rs.j2" "$tpl"
mkdir -p /tmp/cache_B && tar xJf whl_carry/br.tar.xz -C /tmp/cache_B
cd /tmp || exit 1
command -v rustc cargo
timeout 20 python -c "from rust_kernels import toolchain; print(toolchain.find_toolchain())" 2>&1 | tail -n 1
RUST_KERNELS_TUNING=off RUST_KERNELS_CACHE_DIR=/tmp/cache_B timeout 40 python -c "
import faulthandler, runpy, sys
faulthandler.dump_traceback_later(20, exit=True)
sys.argv = ['rust_kernels', *sys.argv[1:]]
runpy.run_module('rust_kernels', run_name='__main__')" \
    bench --family batch_norm_2d_training_channels_last --dtype f32 --shapes 32x256x28x28 --compile-every 0 \
    --skip-launch --reps 20 --host-calls 10 --out "$OUT/probe_b" > "$OUT/probe_b.log" 2>&1
echo "probe B rc $?"; tail -n 40 "$OUT/probe_b.log"
cp /tmp/cl_main.rs.j2 "$tpl"
