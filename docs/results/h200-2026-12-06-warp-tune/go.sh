#!/usr/bin/env bash
# On an H200, from the repository root, with keys.py's kernels in rkc.tgz (python keys.py DEST; tar czf rkc.tgz -C
# DEST .): the autotuner over shapes.txt (the NCHW training families) and shapes_hw1.txt (those and the NCHW eval
# families), timing only the candidates the shipped table lacks, exported to $OUT/tune_{warp,hw1}.json.gz; then the
# warp probe's rule pairs (../h100-2026-12-06-warp/probe.py rule) in what is left of TOTAL seconds.
#   bash go.sh TUNE_SECONDS TOTAL_SECONDS
set -uo pipefail
tune_s=${1:?seconds for each tune}; total=${2:?seconds in all}
here=docs/results/h200-2026-12-06-warp-tune
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
grep -q H200 "$OUT/gpu.txt" || { echo "not an H200: nothing run"; exit 3; }
mkdir -p /tmp/rkc && tar xzf rkc.tgz -C /tmp/rkc
export RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$PWD/python
training=(batch_norm_2d_training batch_norm_2d_training_relu batch_norm_2d_training_add_relu)
eval_ops=(batch_norm_2d_nchw_backward batch_norm_2d_nchw_forward_inference batch_norm_2d_act_eval_forward
          batch_norm_2d_act_eval_backward batch_norm_2d_add_relu_eval_forward batch_norm_2d_add_relu_eval_backward)
for part in warp hw1; do
    if [ "$part" = warp ]; then ops=("${training[@]}"); shapes=$here/shapes.txt
    else ops=("${training[@]}" "${eval_ops[@]}"); shapes=$here/shapes_hw1.txt; fi
    timeout $(( tune_s + 60 )) env -u RUST_KERNELS_QUIET python -m rust_kernels tune --op "${ops[@]}" \
        --shapes "$shapes" --budget "$tune_s" --export "$OUT/tune_$part.json.gz" > "$OUT/tune_$part.log" 2>&1
    echo "tune $part rc $? at $SECONDS s"; tail -c 400 "$OUT/tune_$part.log"; echo
done
export RUST_KERNELS_TUNING=off
for d in bf16-f32 f32; do
    left=$(( (total - SECONDS) / 2 )); [ "$d" = f32 ] && left=$(( total - SECONDS ))
    [ "$left" -gt 30 ] || break
    timeout "$left" python docs/results/h100-2026-12-06-warp/probe.py rule "$d" > "$OUT/rule_$d.log" 2>&1
    echo "rule $d rc $? at $SECONDS s"
done
