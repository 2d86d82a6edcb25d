#!/usr/bin/env bash
# On the H200, from the repository root, with the sm_90 wheel of this commit in whl_carry/: the autotuner over the
# channels_last training families (their backward reductions capped at 80 registers) and the NCHW add + ReLU family
# (no shipped entries before: scripts/merge_tuning_table.py dropped them, see README), times only the candidates the
# wheel's table lacks, and exports the entries to $OUT/$1.json.gz.
set -uo pipefail
python -m pip install -q --no-deps --force-reinstall whl_carry/*.whl 2>&1 | grep -v WARN
cd /tmp || exit 1  # the installed package, not the checkout's
families=(batch_norm_2d_training_channels_last batch_norm_2d_training_relu_channels_last
          batch_norm_2d_training_add_relu_channels_last batch_norm_2d_training_add_relu)
timeout $(( ${TUNE_BUDGET:-500} + 60 )) env -u RUST_KERNELS_QUIET python -m rust_kernels tune --op "${families[@]}" \
    --budget "${TUNE_BUDGET:-500}" --export "$OUT/$1.json.gz" > "$OUT/$1.log" 2>&1
echo "tune rc $?"; tail -c 700 "$OUT/$1.log"
