#!/usr/bin/env bash
# On an H200 only (elsewhere it stops at once), from the repository root with rkc.tar.xz (build.py) and the native
# extension carried: the shipped table's missing entries for this session's and 12-06's kernels, exported for
# scripts/merge_tuning_table.py: the grouped eval backward (../h100-2026-12-07-eval-groups/shapes.txt, the bf16
# rule's shapes first), the cooperative kernels (shapes_coop.txt) and the packed eval forward
# (../h100-2026-12-06-cooperative/shapes_eval.txt), in TOTAL_S.
#   bash go3.sh [TOTAL_S]
set -uo pipefail
total=${1:-300}
repo=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
grep -q H200 "$OUT/gpu.txt" || exit 0
mkdir -p /tmp/rkc && xz -dc rkc.tar.xz | tar xf - -C /tmp/rkc
export RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$repo/python
tune() {  # NAME SHAPES BUDGET_S OPS...
    local name=$1 shapes=$2 budget=$3; shift 3
    timeout $(( budget + 30 )) python -m rust_kernels tune --op "$@" --shapes "$shapes" --budget "$budget" \
        --export "$OUT/$name.json.gz" > "$OUT/$name.log" 2>&1
    echo "$name rc $? at $SECONDS s"; tail -c 400 "$OUT/$name.log"; echo
}
budget=$(( total - 100 ))
tune tune_groups $repo/docs/results/h100-2026-12-07-eval-groups/shapes.txt $(( budget * 35 / 100 )) \
    batch_norm_2d_nchw_backward
tune tune_coop $repo/docs/results/h100-2026-12-07-e2e/shapes_coop.txt $(( budget * 45 / 100 )) \
    batch_norm_2d_training_channels_last batch_norm_2d_training_relu_channels_last \
    batch_norm_2d_training_add_relu_channels_last
tune tune_eval $repo/docs/results/h100-2026-12-06-cooperative/shapes_eval.txt $(( budget * 20 / 100 )) \
    batch_norm_2d_nchw_forward_inference
