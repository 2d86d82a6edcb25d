#!/usr/bin/env bash
# On the H200, from the repository root, with the sm_90 wheel in whl_carry/whl.tar.xz: the autotuner over the suite
# shapes where the GROUPS reductions are candidates (group_shapes.txt; three NCHW training families), and over the
# shapes whose ReLU backward reductions were renamed by the change (act_shapes.txt; VECTORIZED 0's PTX reordered),
# exported for merge_tuning_table.py.
set -uo pipefail
here=$PWD/docs/results/h200-2026-12-04-groups
bash docs/results/h200-2026-12-04-training-suite/install_wheel.sh
cd /tmp || exit 1
timeout 300 env -u RUST_KERNELS_QUIET python -m rust_kernels tune --op batch_norm_2d_training \
    batch_norm_2d_training_relu batch_norm_2d_training_add_relu --shapes "$here/group_shapes.txt" --budget 270 \
    --export "$OUT/tune_groups.json.gz" > "$OUT/tune_groups.log" 2>&1
echo "tune rc $?"; tail -c 400 "$OUT/tune_groups.log"
timeout 180 env -u RUST_KERNELS_QUIET python -m rust_kernels tune --op batch_norm_2d_training_relu \
    batch_norm_2d_training_add_relu --shapes "$here/act_shapes.txt" --budget 150 \
    --export "$OUT/tune_act.json.gz" > "$OUT/tune_act.log" 2>&1
echo "tune rc $?"; tail -c 400 "$OUT/tune_act.log"
