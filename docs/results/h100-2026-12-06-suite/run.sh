#!/usr/bin/env bash
# On the GPU machine, from the repository root, with this commit's sm_90 wheel carried as whl_carry/whl.tar.xz:
# `bench --suite` with the shipped table of this commit (block kernels included since 6c10d29) over the training ops
# (NCHW and channels_last) and the eval ops, f32 and bf16 with f32 parameters, ours vs eager vs torch.compile vs the
# bound in one process, spread over the suite until the budget (seconds, $1) is spent. FAMILIES: others instead.
set -uo pipefail
[ -n "${INSTALLED:-}" ] || bash "$PWD/docs/results/h200-2026-12-04-training-suite/install_wheel.sh"
cd /tmp || exit 1  # the installed package, not the checkout's
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
budget=${1:-420}
families=${FAMILIES:-batch_norm_2d_training batch_norm_2d_training_channels_last batch_norm_2d_nchw_backward
                    batch_norm_2d_nchw_forward_inference}
# shellcheck disable=SC2086 # the families split
timeout $(( budget + 90 )) python -m rust_kernels bench --suite --family $families \
    --dtype bf16-f32 f32 --compile-every 4 --skip-launch --reps 20 --budget "$budget" --out "$OUT/bench" \
    > "$OUT/bench.log" 2>&1
echo "bench rc $?"; tail -n 40 "$OUT/bench.log" | cut -c1-220
