#!/usr/bin/env bash
# On the H200, from the repository root, with main's sm_90 wheel in whl_carry/whl.tar.xz: the eval-mode fused ops
# (BN + act, BN + add + ReLU; 8fe8aeb) for the first time on a GPU: their GPU tests, the cross-check of their four
# families, compute-sanitizer over their plans, the op benchmark of their forwards (with host cost per call).
set -uo pipefail
fams=(batch_norm_2d_act_eval_forward batch_norm_2d_act_eval_backward batch_norm_2d_add_relu_eval_forward
      batch_norm_2d_add_relu_eval_backward)
bash docs/results/h200-2026-12-04-training-suite/install_wheel.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 170 python -m pytest -q -m gpu -p no:cacheprovider tests/test_eval_fused.py tests/test_bench_models.py \
    > "$OUT/pytest_gpu.log" 2>&1
echo "pytest rc $?"; tail -n 4 "$OUT/pytest_gpu.log"
cd /tmp || exit 1
timeout 80 python -m rust_kernels check --backend cuda --family "${fams[@]}" > "$OUT/check_cuda.log" 2>&1
echo "check rc $?"; tail -n 3 "$OUT/check_cuda.log"
timeout 115 python -m rust_kernels sanitize --out "$OUT/sanitize" --tools memcheck racecheck synccheck initcheck \
    --timeout 27 --family "${fams[@]}" > "$OUT/sanitize_run.log" 2>&1
echo "sanitize rc $?"; tail -n 8 "$OUT/sanitize_run.log"
timeout 110 python -m rust_kernels bench --family batch_norm_2d_act_eval_forward \
    batch_norm_2d_act_eval_forward_channels_last batch_norm_2d_add_relu_eval_forward \
    batch_norm_2d_add_relu_eval_forward_channels_last --dtype f32 bf16-f32 --compile-every 2 --skip-launch \
    --budget 95 --out "$OUT/bench_ops" > "$OUT/bench_ops.log" 2>&1
echo "bench rc $?"; grep -v "^\[" "$OUT/bench_ops.log" | tail -n 60
