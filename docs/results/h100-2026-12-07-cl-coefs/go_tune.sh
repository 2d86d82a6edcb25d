#!/usr/bin/env bash
# On an H200 only (elsewhere it stops at once), from the repository root with packed_coefficients.patch applied, with
# rkc.tar.xz (go.sh) and the native extension carried: `tune` over the suite (spread order) of the three channels_last eval forward families, whose
# kernels' sources changed, exported for scripts/merge_tuning_table.py, in TOTAL_S.
#   bash go_tune.sh [TOTAL_S]
set -uo pipefail
total=${1:-460}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
grep -q H200 "$OUT/gpu.txt" || exit 0
mkdir -p /tmp/rkc && xz -dc rkc.tar.xz | tar xf - -C /tmp/rkc
export RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$PWD/python
budget=$(( total - SECONDS - 40 ))
timeout $(( budget + 30 )) python -m rust_kernels tune --op batch_norm_2d_eval_forward_channels_last \
    batch_norm_2d_act_eval_forward_channels_last batch_norm_2d_add_relu_eval_forward_channels_last \
    --budget "$budget" --export "$OUT/tune_cl.json.gz" > "$OUT/tune_cl.log" 2>&1
echo "tune_cl rc $? at $SECONDS s"; tail -c 800 "$OUT/tune_cl.log"; echo
