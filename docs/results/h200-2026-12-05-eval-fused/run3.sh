#!/usr/bin/env bash
# On the H200 (the wheel installed): what run1.sh's limits cut short (12-05 fifth): `check --backend cuda` of the
# eval fused families to the end (5 595 cases; 2 796 took 140 s: each case's float64 reference and comparison take
# about 0.2 s of host time at 32x64x28x28, where each family has 90 plans a dtype), then compute-sanitizer's memcheck
# and initcheck over them.
set -uo pipefail
fams=(batch_norm_2d_act_eval_forward batch_norm_2d_act_eval_backward batch_norm_2d_add_relu_eval_forward
      batch_norm_2d_add_relu_eval_backward)
[ -d /tmp/wheel ] || bash docs/results/h200-2026-12-04-training-suite/install_wheel.sh
cd /tmp || exit 1
timeout 330 python -m rust_kernels check --backend cuda --family "${fams[@]}" > "$OUT/check_cuda.log" 2>&1
echo "check rc $?"; grep -v "^\[" "$OUT/check_cuda.log" | tail -n 30
timeout 250 python -m rust_kernels sanitize --out "$OUT/sanitize" --tools memcheck initcheck --timeout 120 \
    --family "${fams[@]}" > "$OUT/sanitize_run.log" 2>&1
echo "sanitize rc $?"; tail -n 6 "$OUT/sanitize_run.log"
