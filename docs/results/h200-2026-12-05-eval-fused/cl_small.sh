#!/usr/bin/env bash
# On the H200 (the wheel with SMALL_TENSOR_BYTES installed): the tuner, forced (every candidate re-timed in this one
# process), for the ops named (default: the plain and ReLU channels_last training ops) over channels_last training
# shapes of at most 8 MB in bf16 (small_cl_shapes.txt, in the suite's spread order until the budget), where the
# one-launch channels_last kernels are now candidates at every block width; exported, so that cl_small.py compares
# per key the best one-launch plan with the best two-launch one.
#   bash cl_small.sh [SECONDS] [OP ...]
set -uo pipefail
[ -d /tmp/wheel ] || bash docs/results/h200-2026-12-04-training-suite/install_wheel.sh
here=$PWD/docs/results/h200-2026-12-05-eval-fused
cd /tmp || exit 1
s=${1:-240}
shift || true
ops=("${@:-batch_norm_2d_training_channels_last batch_norm_2d_training_relu_channels_last}")
# shellcheck disable=SC2068 # the default list splits into its ops
timeout "$s" python -m rust_kernels tune --op ${ops[@]} --shapes "$here/small_cl_shapes.txt" --force \
    --budget $(( s - 25 )) --export "$OUT/tune_cl_small.json.gz" > "$OUT/tune_cl_small.log" 2>&1
echo "tune rc $?"; tail -n 6 "$OUT/tune_cl_small.log"
