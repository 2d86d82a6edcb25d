#!/usr/bin/env bash
# On the H200 after run1.sh (main's wheel installed): the op benchmark of the eval fused backwards; ResNet-50 and
# MobileNetV2 with BN frozen (fine-tuning) and in inference, each BN + ReLU and BN + add + ReLU fused by
# convert(fuse=True), both memory formats, bf16 batch 32, against torch in one process.
set -uo pipefail
[ -d /tmp/wheel ] || bash docs/results/h200-2026-12-04-training-suite/install_wheel.sh
cd /tmp || exit 1
timeout 130 python -m rust_kernels bench --family batch_norm_2d_act_eval_backward \
    batch_norm_2d_act_eval_backward_channels_last batch_norm_2d_add_relu_eval_backward \
    batch_norm_2d_add_relu_eval_backward_channels_last --dtype f32 bf16-f32 --compile-every 2 --skip-launch \
    --budget 115 --out "$OUT/bench_bwd" > "$OUT/bench_bwd.log" 2>&1
echo "bench rc $?"; grep -v "^\[" "$OUT/bench_bwd.log" | tail -n 80
for bn in frozen eval; do
  for fmt in contiguous channels_last; do
    timeout 70 python -m rust_kernels bench --models resnet50 mobilenet_v2 --bn $bn --fuse --batch 32 --dtype bf16 \
        --modes eager graph --memory-format $fmt --budget 50 --out "$OUT/models_${bn}_$fmt" \
        > "$OUT/models_${bn}_$fmt.log" 2>&1
    echo "models $bn $fmt rc $?"; grep -A6 "^model  " "$OUT/models_${bn}_$fmt.log"
  done
done
