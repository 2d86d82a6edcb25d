#!/usr/bin/env bash
# The fourth device call, carried as go.sh (rkc.tar.xz: ../h100-2026-12-07-act-groups/build.py's kernels built from
# the tree as committed and from it with before/channels_last.rs.j2, exported to one DEST). A: before/channels_last.rs.j2 copied over codegen/batch_norm/
# (merge_published reading the published slices with volatile loads); B: the tree as committed (plain loads); one
# tuning cache, B's export taken last:
#   1. A: `tune` of the channels_last training op (bf16 with f32 parameters, f32) over coop_shapes.txt and
#      floor_shapes.txt; model steps (bf16 autocast, channels_last, BN training, CUDA graphs): ResNet-50 and
#      MobileNetV2 at B = 32, 64;
#   2. B: `check` (GPU, against float64) of the cooperative and persistent kernels (f32 and bf16 with f32 parameters,
#      the instances carried: the other dtype keys' cases fail as unavailable), the same `tune` and model steps, then
#      the export.
#   bash go4.sh
set -uo pipefail
repo=$PWD; here=$repo/docs/results/h100-2026-12-07-coop-cap
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
mkdir -p /tmp/rkc && xz -dc rkc.tar.xz | tar xf - -C /tmp/rkc
export RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$repo/python
cat "$here/coop_shapes.txt" "$here/floor_shapes.txt" > /tmp/shapes.txt
tune() {  # SIDE
    timeout 150 python -m rust_kernels tune --op batch_norm_2d_training_channels_last --dtype bf16-f32 f32 \
        --shapes /tmp/shapes.txt --budget 120 --export "$OUT/tune_$1.json.gz" > "$OUT/tune_$1.log" 2>&1
    echo "tune $1 rc $? at $SECONDS s"; tail -c 250 "$OUT/tune_$1.log"; echo
}
models() {  # SIDE
    timeout 120 python -m rust_kernels bench --models resnet50 mobilenet_v2 --batch 32 64 --bn train \
        --memory-format channels_last --dtype bf16 --fuse --modes graph --profile-steps 0 --budget 90 \
        --out "$OUT/models_$1" > "$OUT/models_$1.log" 2>&1
    echo "models $1 rc $? at $SECONDS s"; grep "graph: torch" "$OUT/models_$1.log" | cut -c1-110
}
cp codegen/batch_norm/channels_last.rs.j2 /tmp/committed.rs.j2
cp "$here/before/channels_last.rs.j2" codegen/batch_norm/
tune A
models A
cp /tmp/committed.rs.j2 codegen/batch_norm/channels_last.rs.j2
timeout 170 python -m rust_kernels check --kernel batch_norm_2d_cooperative_forward_channels_last \
    batch_norm_2d_cooperative_forward_channels_last_act batch_norm_2d_cooperative_backward_channels_last \
    batch_norm_2d_cooperative_backward_channels_last_act batch_norm_2d_persistent_forward_channels_last \
    batch_norm_2d_persistent_forward_channels_last_act batch_norm_2d_persistent_backward_channels_last \
    batch_norm_2d_persistent_backward_channels_last_act > "$OUT/check_B.log" 2>&1
echo "check B rc $? at $SECONDS s"; grep "^FAIL" "$OUT/check_B.log" | grep -c "__f32__\|__bf16-f32__"
grep "^FAIL" "$OUT/check_B.log" | grep "__f32__\|__bf16-f32__" | head -3 | cut -c1-300; tail -2 "$OUT/check_B.log" | cut -c1-300
tune B
models B
tune B_all  # every case journaled: nothing timed, the export now holds models B's entries too
(cd "$OUT" && tar czf /tmp/out.tgz --exclude=gpu.txt . && find . -mindepth 1 ! -name gpu.txt -delete &&
    mv /tmp/out.tgz .)
