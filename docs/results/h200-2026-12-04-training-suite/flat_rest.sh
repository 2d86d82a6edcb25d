#!/usr/bin/env bash
# On the H200, from the repository root, with the sm_90 wheel of the FLAT commit in whl_carry/whl.tar.xz: the
# autotuner on the rest of the suite shapes where FLAT is a candidate (flat_rest_shapes.txt, in the suite's spread
# order), exported; then an Inception-v3 training step (its 111x111, 109x109, 25x25 and 5x5 rows take FLAT), bf16
# autocast, NCHW, BN in training mode, ours vs torch under a CUDA graph.
set -uo pipefail
here=$PWD/docs/results/h200-2026-12-04-training-suite
bash "$here/install_wheel.sh"
cd /tmp || exit 1
families=(batch_norm_2d_training batch_norm_2d_training_relu batch_norm_2d_training_add_relu)
timeout 320 env -u RUST_KERNELS_QUIET python -m rust_kernels tune --op "${families[@]}" \
    --shapes "$here/flat_rest_shapes.txt" --budget "${TUNE_BUDGET:-270}" --export "$OUT/tune_flat_rest.json.gz" \
    > "$OUT/tune_flat_rest.log" 2>&1
echo "tune rc $?"; tail -c 400 "$OUT/tune_flat_rest.log"
timeout 200 python -m rust_kernels bench --models inception_v3 --bn train --batch 64 --dtype bf16 --modes graph \
    --memory-format contiguous --budget 150 --out "$OUT/models" > "$OUT/models_inception.log" 2>&1
echo "models rc $?"
grep -A12 "kernels counted as BN, ours" "$OUT/models_inception.log" | head -14; grep -A5 "^model  " "$OUT/models_inception.log"
tail -n 5 "$OUT/models_inception.log"
