#!/usr/bin/env bash
# With rkc.tar.xz holding every instance the eval forward's and the eval-mode fused ops' check plans launch (sm_90)
# and the native extension carried: the GPU check of the _packed kernels (their plans in every dtype key), then of
# the eval-mode fused ops (BN + activation, BN + add + ReLU; NCHW and channels_last; every dtype key and activation),
# which no run had finished (README Known gaps: 2 796 of then 5 595 cases on 12-05), in what is left of TOTAL_S.
#   bash go_eval_fused.sh [TOTAL_S]
set -uo pipefail
total=${1:-300}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
mkdir -p /tmp/rkc && xz -dc rkc.tar.xz | tar xf - -C /tmp/rkc
export RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$PWD/python
check() {  # NAME SECONDS CHECK_ARGS...
    local name=$1 s=$2; shift 2
    timeout "$s" python -m rust_kernels check "$@" > "$OUT/$name.log" 2>&1
    echo "$name rc $? at $SECONDS s"; grep -v "^\[" "$OUT/$name.log" | grep -i "fail\|passed\|interrupted" | tail -5
}
check check_packed_variants 120 --kernel batch_norm_2d_frozen_forward_channels_last_packed \
    batch_norm_2d_frozen_forward_act_packed batch_norm_2d_frozen_forward_add_relu_packed
check check_eval_fused $(( total - SECONDS )) --family batch_norm_2d_act_eval_forward \
    batch_norm_2d_act_eval_backward batch_norm_2d_add_relu_eval_forward batch_norm_2d_add_relu_eval_backward
gzip "$OUT"/*.log
