#!/usr/bin/env bash
# On the H200, from the repository root, with the sm_90 wheel installed (../h200-2026-12-04-training-suite/
# install_wheel.sh): compute-sanitizer's four tools over the training families' plans, whose sanitize shapes now
# include rows of 9 (16-byte packs across two channels in the masked and grouped NCHW reductions, every dtype).
set -uo pipefail
cd /tmp || exit 1
timeout 560 python -m rust_kernels sanitize --out "$OUT/sanitize" --timeout 200 --family batch_norm_2d_forward \
    batch_norm_2d_backward batch_norm_2d_act_forward batch_norm_2d_act_backward batch_norm_2d_add_relu_forward \
    batch_norm_2d_add_relu_backward 2>&1 | tee "$OUT/sanitize_run.log"
