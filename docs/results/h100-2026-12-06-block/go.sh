#!/usr/bin/env bash
# On the GPU, from the repository root, with probe.py's kernels in rkc.tgz (python probe.py build DEST; tar czf
# rkc.tgz -C DEST .): on an H200 first the autotuner over shapes.txt (the NCHW training families, timing only the
# candidates the shipped table lacks: the block kernels), exported to $OUT/tune_block.json.gz; then the probe's
# timings (f32, bf16), the GPU check of every case launching a block kernel, compute-sanitizer over the cases
# launching one, and the probe's rule pairs, each in what is left of TOTAL seconds.
#   bash go.sh TUNE_SECONDS TOTAL_SECONDS [STEPS]   (STEPS: any of tune time check sanitize rule models;
#   default all but models)
set -uo pipefail
tune_s=${1:?seconds for the tune}; total=${2:?seconds in all}; steps=${3:-tune time check sanitize rule}
here=docs/results/h100-2026-12-06-block
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
mkdir -p /tmp/rkc && tar xzf rkc.tgz -C /tmp/rkc
export RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$PWD/python RUST_KERNELS_BLOCK=1
names=(batch_norm_2d_block_forward batch_norm_2d_block_forward_act batch_norm_2d_block_backward
       batch_norm_2d_block_backward_act)
left() { echo $(( total - SECONDS )); }
if [[ $steps == *tune* ]] && grep -q H200 "$OUT/gpu.txt"; then
    timeout $(( tune_s + 60 )) env -u RUST_KERNELS_QUIET python -m rust_kernels tune --op batch_norm_2d_training \
        batch_norm_2d_training_relu batch_norm_2d_training_add_relu --shapes $here/shapes.txt --budget "$tune_s" \
        --export "$OUT/tune_block.json.gz" > "$OUT/tune_block.log" 2>&1
    echo "tune rc $? at $SECONDS s"; tail -c 400 "$OUT/tune_block.log"; echo
fi
if [[ $steps == *time* ]]; then
    for d in bf16-f32 f32; do
        budget=$(( ($(left) - 120) / 2 )); [ "$budget" -gt 30 ] || break
        RUST_KERNELS_TUNING=off timeout "$budget" python $here/probe.py time "$d" > "$OUT/block_$d.log" 2>&1
        echo "time $d rc $? at $SECONDS s"
    done
fi
if [[ $steps == *check* ]] && [ "$(left)" -gt 30 ]; then
    RUST_KERNELS_TUNING=off timeout $(( $(left) - 10 )) python -m rust_kernels check --kernel "${names[@]}" \
        > "$OUT/check.log" 2>&1
    echo "check rc $? at $SECONDS s"; tail -n 25 "$OUT/check.log" | cut -c1-160
fi
if [[ $steps == *sanitize* ]] && [ "$(left)" -gt 30 ]; then
    export PATH=$PATH:/usr/local/cuda/bin
    timeout $(( $(left) - 5 )) python -m rust_kernels sanitize --kernel "${names[@]}" --out "$OUT" \
        --timeout $(( ($(left) - 10) / 4 )) > "$OUT/sanitize_stdout.log" 2>&1
    echo "sanitize rc $? at $SECONDS s"; tail -n 12 "$OUT/sanitize_stdout.log"
fi
if [[ $steps == *rule* ]]; then
    for d in bf16-f32 f32; do
        budget=$(( $(left) / 2 )); [ "$d" = f32 ] && budget=$(left)
        [ "$budget" -gt 30 ] || break
        RUST_KERNELS_TUNING=off timeout "$budget" python $here/probe.py rule "$d" > "$OUT/rule_$d.log" 2>&1
        echo "rule $d rc $? at $SECONDS s"
    done
fi
# The model steps with and without the block kernels (models.py), B = 32, BN training, bf16, NCHW, fused.
if [[ $steps == *models* ]]; then
    for side in with without; do
        budget=$(( ($(left) - 40) / 2 )); [ "$side" = without ] && budget=$(( $(left) - 20 ))
        [ "$budget" -gt 60 ] || break
        timeout $(( budget + 20 )) python $here/models.py $side --models resnet50 mobilenet_v2 --batch 32 --bn train \
            --dtype bf16 --fuse --modes graph eager --profile-steps 0 --out "$OUT/models_$side" --budget "$budget" \
            > "$OUT/models_$side.log" 2>&1
        echo "models $side rc $? at $SECONDS s"; tail -n 8 "$OUT/models_$side.log"
    done
fi
