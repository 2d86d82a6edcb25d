#!/usr/bin/env bash
# On the H200, from the repository root, with whl_carry/old.tar.xz (78c70cf) and whl_carry/whl.tar.xz (8ee4ae6):
# first_calls.py under each (a fresh process, the shipped table serving), then `tune` walking served cases under each.
set -uo pipefail
here=$PWD/docs/results/h200-2026-12-04-training-suite
for wheel in old whl; do
    bash "$here/install_wheel.sh" "whl_carry/$wheel.tar.xz"
    (cd /tmp && timeout 120 python "$here/first_calls.py" 40) > "$OUT/first_calls_$wheel.log" 2>&1
    echo "$wheel: first_calls rc $?"; tail -n 2 "$OUT/first_calls_$wheel.log"
    (cd /tmp && timeout 100 env -u RUST_KERNELS_QUIET python -m rust_kernels tune --op batch_norm_2d_training \
        batch_norm_2d_training_channels_last --shapes "$here/flat_two_launch_shapes.txt") > "$OUT/tune_served_$wheel.log" 2>&1
    echo "$wheel: tune rc $?"; tail -c 250 "$OUT/tune_served_$wheel.log"
done
