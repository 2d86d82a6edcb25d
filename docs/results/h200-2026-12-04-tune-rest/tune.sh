#!/usr/bin/env bash
# On the H200, from the repository root, with the sm_90 wheel of this commit in whl_carry/: the autotuner over the
# four families 12-04's run left part-timed (the channels_last training families and NCHW add + ReLU), on the 179
# suite shapes it did not begin (shapes.txt, from untimed.py), exporting the entries to $OUT/$1.json.gz.
set -uo pipefail
python -m pip install -q --no-deps --force-reinstall whl_carry/*.whl 2>&1 | grep -v WARN
here=$PWD/docs/results/h200-2026-12-04-tune-rest
cd /tmp || exit 1  # the installed package, not the checkout's
families=(batch_norm_2d_training_channels_last batch_norm_2d_training_relu_channels_last
          batch_norm_2d_training_add_relu_channels_last batch_norm_2d_training_add_relu)
timeout $(( ${TUNE_BUDGET:-300} + 60 )) env -u RUST_KERNELS_QUIET python -m rust_kernels tune --op "${families[@]}" \
    --shapes "$here/shapes.txt" --budget "${TUNE_BUDGET:-300}" --export "$OUT/$1.json.gz" > "$OUT/$1.log" 2>&1
echo "tune rc $?"; tail -c 700 "$OUT/$1.log"
