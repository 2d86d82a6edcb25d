#!/usr/bin/env bash
# On the GPU machine, from the repository root, with the sm_90 wheel of this commit in whl_carry/whl.tar.xz:
#   bash run.sh install            installs the wheel
#   bash run.sh tune PART SECONDS  the autotuner with the persistent channels_last kernels among the candidates
#                                  (RUST_KERNELS_PERSISTENT=1) over shapes_PART.txt, the suite shapes whose keys the
#                                  shipped table lacks them for (unserved.py): a, those of the 40 suite shapes
#                                  test_tuning checks; b, the rest. Exports to $OUT/tune_PART.json.gz
#   bash run.sh models P [SECONDS] [BATCH..]  the ResNet-50 channels_last training step (CUDA graph and eager,
#                                  B=128 and 32 unless BATCH..), RUST_KERNELS_PERSISTENT=P, torch and ours in one
#                                  process
set -uo pipefail
stage=${1:?install, tune or models}
here=$PWD/docs/results/h200-2026-12-06-persistent-tune
nvidia-smi --query-gpu=name --format=csv,noheader
case $stage in
install)
    bash docs/results/h200-2026-12-04-training-suite/install_wheel.sh ;;
tune)
    cd /tmp || exit 1  # the installed package, not the checkout's
    part=${2:?a or b}; budget=${3:?seconds}
    families=(batch_norm_2d_training_channels_last batch_norm_2d_training_relu_channels_last
              batch_norm_2d_training_add_relu_channels_last)
    RUST_KERNELS_PERSISTENT=1 timeout $(( budget + 60 )) env -u RUST_KERNELS_QUIET python -m rust_kernels tune \
        --op "${families[@]}" --shapes "$here/shapes_$part.txt" --budget "$budget" \
        --export "$OUT/tune_$part.json.gz" > "$OUT/tune_$part.log" 2>&1
    echo "tune $part rc $? in $SECONDS s"; tail -c 600 "$OUT/tune_$part.log"; echo ;;
models)
    cd /tmp || exit 1
    p=${2:?0 or 1}; budget=${3:-150}; shift $(( $# < 3 ? $# : 3 )); batches=("${@:-128 32}")
    RUST_KERNELS_PERSISTENT=$p timeout $(( budget + 60 )) python -m rust_kernels bench --models resnet50 \
        --batch ${batches[@]} --bn train --memory-format channels_last --fuse --modes graph eager \
        --out "$OUT/models_p$p" --budget "$budget" > "$OUT/models_p$p.log" 2>&1
    echo "models persistent=$p rc $?"; tail -n 14 "$OUT/models_p$p.log" ;;
esac
