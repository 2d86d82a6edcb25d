#!/usr/bin/env bash
# The session's device call, from the repository root, with rkc.tar.xz carried there (every catalogue kernel in f32
# and bf16-f32, sm_90: build.py) and python/rust_kernels/_host.abi3.so. Most needed first:
#   on an H200: the shipped table's missing entries for the cooperative kernels and the packed eval forward
#     (../h100-2026-12-06-cooperative/shapes*.txt, `tune`, TUNE_S, exported);
#   the NCHW eval backward's candidates where no 16-byte pack divides H*W, the new grouped kernel's among them
#     (../h100-2026-12-07-eval-groups/probe.py, GROUPS_S), after its GPU check (and its sanitizer run last);
#   the cooperative kernels past their 24 MiB candidate bound (coop_bound.py, PROBE_S);
#   host µs per op call and the ops' GPU time against torch's (`bench`, three shapes);
#   a ResNet-50 channels_last training step (B = 32 and 64, bf16 and f32, fused; eager and CUDA graph), with the
#     persistent and cooperative kernels (the default) and without (RUST_KERNELS_PERSISTENT=0, graph only).
#   bash go.sh [TOTAL_S] [PROBE_S] [TUNE_S] [GROUPS_S]
set -uo pipefail
total=${1:-570}; probe_s=${2:-120}; tune_s=${3:-110}; groups_s=${4:-100}
repo=$PWD; here=$repo/docs/results/h100-2026-12-07-e2e; coop=$repo/docs/results/h100-2026-12-06-cooperative
mkdir -p /tmp/rkc && xz -dc rkc.tar.xz | tar xf - -C /tmp/rkc
export RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$repo/python
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
left() { echo $(( total - SECONDS )); }
if grep -q H200 "$OUT/gpu.txt"; then
    families=(batch_norm_2d_training_channels_last batch_norm_2d_training_relu_channels_last
              batch_norm_2d_training_add_relu_channels_last)
    timeout $(( tune_s + 40 )) python -m rust_kernels tune --op "${families[@]}" --shapes $coop/shapes.txt \
        --budget "$tune_s" --export "$OUT/tune.json.gz" > "$OUT/tune.log" 2>&1
    echo "tune rc $? at $SECONDS s"; tail -c 600 "$OUT/tune.log"; echo
    timeout $(( tune_s / 2 + 40 )) python -m rust_kernels tune --op batch_norm_2d_nchw_forward_inference \
        --shapes $coop/shapes_eval.txt --budget $(( tune_s / 2 )) --export "$OUT/tune_eval.json.gz" \
        > "$OUT/tune_eval.log" 2>&1
    echo "tune eval rc $? at $SECONDS s"; tail -c 400 "$OUT/tune_eval.log"; echo
fi
mkdir -p "$OUT/eval_groups" "$OUT/coop_bound"
grouped=(--family batch_norm_2d_nchw_backward --kernel batch_norm_2d_frozen_backward_grouped)
timeout 60 python -m rust_kernels check "${grouped[@]}" > "$OUT/eval_groups/check.log" 2>&1
echo "check rc $? at $SECONDS s"; tail -n 9 "$OUT/eval_groups/check.log"
OUT=$OUT/eval_groups RUST_KERNELS_TUNING=off timeout "$groups_s" python $repo/docs/results/h100-2026-12-07-eval-groups/probe.py \
    > "$OUT/eval_groups/probe.log" 2>&1
echo "eval_groups rc $? at $SECONDS s"; grep -v "^\[" "$OUT/eval_groups/probe.log" | cut -c1-300 | tail -26
OUT=$OUT/coop_bound RUST_KERNELS_TUNING=off timeout "$probe_s" python $here/coop_bound.py time \
    > "$OUT/coop_bound/probe.log" 2>&1
echo "coop_bound rc $? at $SECONDS s"; grep -v "^\[" "$OUT/coop_bound/probe.log" | cut -c1-330 | tail -24
timeout 80 python -m rust_kernels bench --family batch_norm_2d_training_channels_last \
    batch_norm_2d_nchw_forward_inference --shapes 8x32x8x8 32x128x28x28 128x992x7x7 --dtype bf16-f32 f32 \
    --skip-launch --compile-every 0 --reps 20 --out "$OUT/ops" > "$OUT/ops.log" 2>&1
echo "ops rc $? at $SECONDS s"; grep -v "^\[" "$OUT/ops.log" | cut -c1-220 | tail -30
models() {  # OUT_NAME BUDGET_S MODES...
    local name=$1 budget=$2; shift 2
    timeout $(( budget + 30 )) python -m rust_kernels bench --models resnet50 --batch 32 64 --bn train \
        --memory-format channels_last --dtype bf16 f32 --fuse --modes "$@" --profile-steps 0 --budget "$budget" \
        --out "$OUT/$name" > "$OUT/$name.log" 2>&1
    echo "$name rc $? at $SECONDS s"; grep -A 10 "^model " "$OUT/$name.log" | cut -c1-150
}
models models $(( ($(left) - 60) * 6 / 10 )) eager graph
RUST_KERNELS_PERSISTENT=0 models models_no_persistent $(( $(left) - 70 )) graph
timeout $(( $(left) - 5 )) python -m rust_kernels sanitize "${grouped[@]}" --tools memcheck racecheck synccheck \
    --timeout 20 --out "$OUT/eval_groups" > "$OUT/eval_groups/sanitize_run.log" 2>&1
echo "sanitize rc $? at $SECONDS s"; tail -n 6 "$OUT/eval_groups/sanitize_run.log"
