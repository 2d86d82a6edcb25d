#!/usr/bin/env bash
# On the GPU, from the repository root, with both sides' kernels in rkc_silu.txz (probe.py build DEST, run once with
# PYTHONPATH=.ab/a/python, the templates before the change, and once from the repository, after; tar cJf
# rkc_silu.txz -C DEST .) and side A's package in .ab/a: the steps named, in order.
#   probe     probe.py time, sides A B A B, each in its own process
#   models    bench --models efficientnet_b0, B = 128, BN training, bf16 autocast, convert(fuse=True), CUDA graph,
#             NCHW and channels_last, sides A and B (torch's BN the anchor in each process)
#   grads     scripts/model_grads_vs_float64.py efficientnet_b0 train LAYOUT fuse, both layouts, sides A and B
#   check     check_silu.py run (side B): every check case launching a kernel the change touched
set -uo pipefail
here=docs/results/h100-2026-12-06-silu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
[ -d /tmp/rkc/kernels ] || { mkdir -p /tmp/rkc && tar xJf rkc_silu.txz -C /tmp/rkc; }
export RUST_KERNELS_CACHE_DIR=/tmp/rkc RUST_KERNELS_TUNING=off
side() { [ "$1" = A ] && echo .ab/a/python || echo "$PWD/python"; }
for step in "$@"; do
    case $step in
    probe)
        for run in A1 B1 A2 B2; do
            PYTHONPATH=$(side "${run:0:1}") timeout 150 python $here/probe.py time "$run" > "$OUT/probe_$run.csv" \
                2> "$OUT/probe_$run.err"
            echo "probe $run rc $? at $SECONDS s, $(wc -l < "$OUT/probe_$run.csv") lines"
        done ;;
    models)
        for layout in contiguous channels_last; do
            for s in A B; do
                PYTHONPATH=$(side $s) timeout 110 python -m rust_kernels bench --models efficientnet_b0 --bn train \
                    --batch 128 --dtype bf16 --fuse --modes graph --memory-format $layout --budget 75 \
                    --profile-steps 0 --out "$OUT/models_${s}_$layout" > "$OUT/models_${s}_$layout.log" 2>&1
                echo "models $s $layout rc $? at $SECONDS s"; grep -A4 "^model  " "$OUT/models_${s}_$layout.log" | cut -c1-200
            done
        done ;;
    grads)
        for layout in contiguous channels_last; do
            for s in A B; do
                PYTHONPATH=$(side $s) timeout 120 python scripts/model_grads_vs_float64.py efficientnet_b0 train \
                    $layout fuse > "$OUT/grads_${s}_$layout.log" 2>&1
                echo "grads $s $layout rc $? at $SECONDS s"; grep "max rel diff" "$OUT/grads_${s}_$layout.log"
            done
        done ;;
    check)
        PYTHONPATH=$PWD/python timeout 300 python $here/check_silu.py run > "$OUT/check.log" 2>&1
        echo "check rc $? at $SECONDS s"; tail -n 30 "$OUT/check.log" | cut -c1-200 ;;
    *) echo "unknown step $step" ;;
    esac
done
