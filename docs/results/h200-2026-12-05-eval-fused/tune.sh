#!/usr/bin/env bash
# On the H200 (main's wheel installed): the tuner over the eval fused ops' suites (forward and backward, both
# layouts, f32 and bf16-f32), exported for scripts/merge_tuning_table.py.
set -uo pipefail
[ -d /tmp/wheel ] || bash docs/results/h200-2026-12-04-training-suite/install_wheel.sh
cd /tmp || exit 1
timeout "${1:-300}" python -m rust_kernels tune --op batch_norm_2d_act_eval_forward \
    batch_norm_2d_act_eval_forward_channels_last batch_norm_2d_add_relu_eval_forward \
    batch_norm_2d_add_relu_eval_forward_channels_last batch_norm_2d_act_eval_backward \
    batch_norm_2d_act_eval_backward_channels_last batch_norm_2d_add_relu_eval_backward \
    batch_norm_2d_add_relu_eval_backward_channels_last --budget $(( ${1:-300} - 30 )) \
    --export "$OUT/tune_eval_fused.json.gz" > "$OUT/tune.log" 2>&1
echo "tune rc $?"; tail -n 6 "$OUT/tune.log"
