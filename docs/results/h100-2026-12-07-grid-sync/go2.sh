#!/usr/bin/env bash
# go.sh's last step (or a device call of its own, with go.sh's rkc.tar.xz and the native extension carried, after
# `git apply grid_flip.patch`), side B:
# compute-sanitizer memcheck, synccheck and racecheck over the plans of the kernels that call grid::sync (the
# persistent and cooperative channels_last kernels, every dtype key), TOOL_S seconds a tool.
#   bash go2.sh [TOOL_S]
set -uo pipefail
tool_s=${1:-120}
repo=$PWD
mkdir -p "$OUT" && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
[[ -d /tmp/rkc/kernels ]] || { mkdir -p /tmp/rkc && xz -dc rkc.tar.xz | tar xf - -C /tmp/rkc; }
export RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$repo/python
timeout $(( 3 * tool_s + 20 )) python -m rust_kernels sanitize --tools memcheck synccheck racecheck --timeout "$tool_s" \
    --kernel batch_norm_2d_cooperative_forward_channels_last batch_norm_2d_cooperative_forward_channels_last_act \
    batch_norm_2d_cooperative_backward_channels_last batch_norm_2d_cooperative_backward_channels_last_act \
    batch_norm_2d_persistent_forward_channels_last batch_norm_2d_persistent_forward_channels_last_act \
    batch_norm_2d_persistent_backward_channels_last batch_norm_2d_persistent_backward_channels_last_act \
    --out "$OUT/sanitize" > "$OUT/sanitize.log" 2>&1
echo "sanitize rc $? at $SECONDS s"; tail -8 "$OUT/sanitize.log" | cut -c1-300
