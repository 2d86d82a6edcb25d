#!/usr/bin/env bash
# The activation tune for the shipped H200 table, from the repository root with rkc.tar.xz
# (../cpu-2026-12-07-prepared/build.py) and the native extension carried:
#   bash go.sh [TOTAL_S]
# The training BN + activation ops, both layouts, f32 and bf16-f32, timed with SiLU over efficientnet_b0's suite shapes
# and with Hardswish over mobilenet_v3_large's (shapes_*.txt: the suite's shapes whose `from` names the model), so
# that CUDA-graph captures and torch.compile of those models take measured plans; then, in what is left, the eval
# BN + activation forwards likewise. Each tune exported for scripts/merge_tuning_table.py.
set -uo pipefail
source scripts/device_call.sh
device_begin "${1:-560}"
device_on_h200 || { echo "not an H200: its timings cannot go in the H200 table"; exit 3; }
here=docs/results/h200-2026-12-07-act-tune
training=(batch_norm_2d_training_relu batch_norm_2d_training_relu_channels_last)
eval=(batch_norm_2d_act_eval_forward batch_norm_2d_act_eval_forward_channels_last)
device_tune tune_silu 40 --op "${training[@]}" --activation silu --shapes "$here/shapes_silu.txt"
device_tune tune_hardswish 65 --op "${training[@]}" --activation hardswish --shapes "$here/shapes_hardswish.txt"
device_tune tune_eval_silu 50 --op "${eval[@]}" --activation silu --shapes "$here/shapes_silu.txt"
device_tune tune_eval_hardswish 100 --op "${eval[@]}" --activation hardswish --shapes "$here/shapes_hardswish.txt"
device_end
