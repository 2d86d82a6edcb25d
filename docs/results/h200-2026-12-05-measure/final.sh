#!/usr/bin/env bash
# On the H200, from the repository root, with the sm_90 wheel of the racecheck fix in whl_carry/whl.tar.xz (the
# one-launch NCHW training kernels share their results in slots after the reduction's partials): racecheck and
# synccheck over the training families, the GPU cross-check of every check case that launches those kernels, the
# tuner over the shapes whose table entries the fix dropped (retune_shapes.txt, exported for
# scripts/merge_tuning_table.py).
set -uo pipefail
here=$PWD/docs/results/h200-2026-12-05-measure
bash docs/results/h200-2026-12-04-training-suite/install_wheel.sh
cd /tmp || exit 1
timeout 120 python -m rust_kernels sanitize --out "$OUT/sanitize" --tools racecheck synccheck --timeout 100 \
    --family batch_norm_2d_forward batch_norm_2d_backward batch_norm_2d_act_forward batch_norm_2d_act_backward \
    > "$OUT/sanitize_run.log" 2>&1
echo "sanitize rc $?"; cat "$OUT/sanitize_run.log"
timeout 110 python "$here/check_fused.py" cuda > "$OUT/check_fused.log" 2>&1
echo "check rc $?"; tail -n 2 "$OUT/check_fused.log"
timeout 300 python -m rust_kernels tune --op batch_norm_2d_training batch_norm_2d_training_relu \
    batch_norm_2d_training_add_relu --shapes "$here/retune_shapes.txt" --budget 270 --export "$OUT/retune.json.gz" > "$OUT/tune.log" 2>&1
echo "tune rc $?"; tail -n 4 "$OUT/tune.log"
