#!/usr/bin/env bash
# On the H200, from the repository root, with the sm_90 wheel of this commit in whl_carry/: the capped kernels'
# GPU cross-check, the autotuner over the channels_last training families (only candidates without a time: the
# plans launching a capped kernel), and the ResNet-50 and MobileNetV2 channels_last training steps (as 12-03).
set -uo pipefail
here=docs/results/h200-2026-12-04-cl-pipeline/scripts
python -m pip install -q --no-deps --force-reinstall whl_carry/*.whl 2>&1 | grep -v WARN
cd /tmp || exit 1  # the installed package, not the checkout's
repo=$OLDPWD
timeout 150 python "$repo/$here/check_capped.py" batch_norm_2d_backward,batch_norm_2d_act_backward,batch_norm_2d_add_relu_backward \
    > "$OUT/check_capped.txt" 2>&1; echo "check rc $?"; tail -n 4 "$OUT/check_capped.txt"
cl=(batch_norm_2d_training_channels_last batch_norm_2d_training_relu_channels_last
    batch_norm_2d_training_add_relu_channels_last)
timeout 330 env -u RUST_KERNELS_QUIET python -m rust_kernels tune --op "${cl[@]}" --budget "${TUNE_BUDGET:-280}" \
    --export "$OUT/tune_capped.json.gz" > "$OUT/tune_capped.log" 2>&1; echo "tune rc $?"; tail -c 600 "$OUT/tune_capped.log"
timeout 200 python -m rust_kernels bench --models resnet50 mobilenet_v2 --bn train --fuse --batch 128 --dtype bf16 --modes eager graph \
    --memory-format channels_last --budget 150 --out "$OUT/models" > "$OUT/models_cl.log" 2>&1; echo "models rc $?"
grep -A12 "kernels counted as BN, ours" "$OUT/models_cl.log" | head -14; grep -A5 "^model  " "$OUT/models_cl.log"
