#!/usr/bin/env bash
# The session's device call, from the repository root with rkc.tar.xz and the native extension carried. rkc.tar.xz:
# ../h100-2026-12-07-act-groups/build.py's kernels and build.py's exported to one DEST twice, once with the tree as
# committed and once with capped/ copied over codegen/batch_norm/ (both forms of the cooperative kernels, by content
# hash, side by side):
#   tar cf - -C DEST kernels by-source | xz -T2 -6 > rkc.tar.xz
# A, the tree as committed, then B, capped/ (the 16-bit cooperative kernels capped at 80 registers a thread, so three
# 256-thread CTAs fit an SM) and grids of up to four CTAs an SM (COOPERATIVE_CTAS_PER_SM = (2, 3, 4): the f32
# instances take at most 64 registers, except one SiLU backward's 118), one tuning cache (B re-times what changed):
#   1. `tune` of the channels_last training op (bf16 with f32 parameters, f32) over coop_shapes.txt, exported;
#   2. model steps (bf16 autocast, channels_last, BN training, CUDA graphs): ResNet-50 and MobileNetV2 at B = 32, 64;
#   B also `check`s the capped kernels against float64 and ends with ncu of the pair on two shapes.
#   bash go.sh
set -uo pipefail
repo=$PWD; here=$repo/docs/results/h100-2026-12-07-coop-cap; warp=$repo/docs/results/h100-2026-12-07-cl-warp
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
mkdir -p /tmp/rkc && xz -dc rkc.tar.xz | tar xf - -C /tmp/rkc
export RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$repo/python
echo "unpacked at $SECONDS s"
run() {  # SIDE
    timeout 110 python -m rust_kernels tune --op batch_norm_2d_training_channels_last --dtype bf16-f32 f32 \
        --shapes "$here/coop_shapes.txt" --budget 80 --export "$OUT/tune_$1.json.gz" > "$OUT/tune_$1.log" 2>&1
    echo "tune $1 rc $? at $SECONDS s"; tail -c 200 "$OUT/tune_$1.log"; echo
    timeout 120 python -m rust_kernels bench --models resnet50 mobilenet_v2 --batch 32 64 --bn train \
        --memory-format channels_last --dtype bf16 --fuse --modes graph --profile-steps 0 --budget 90 \
        --out "$OUT/models_$1" > "$OUT/models_$1.log" 2>&1
    echo "models $1 rc $? at $SECONDS s"; grep "graph: torch" "$OUT/models_$1.log" | cut -c1-110
}
run A
cp "$here"/capped/*.toml codegen/batch_norm/
sed -i 's/^COOPERATIVE_CTAS_PER_SM = (2, 3)$/COOPERATIVE_CTAS_PER_SM = (2, 3, 4)/' \
    python/rust_kernels/families/batch_norm/training.py
grep -n "^COOPERATIVE_CTAS_PER_SM" python/rust_kernels/families/batch_norm/training.py
COOP="batch_norm_2d_cooperative_forward_channels_last batch_norm_2d_cooperative_forward_channels_last_act
      batch_norm_2d_cooperative_backward_channels_last batch_norm_2d_cooperative_backward_channels_last_act"
timeout 60 python -m rust_kernels check --kernel $COOP > "$OUT/check_B.log" 2>&1
echo "check B rc $? at $SECONDS s"; tail -2 "$OUT/check_B.log"
run B
bash "$warp/ncu/profile.sh" 128x512x7x7:bf16-f32 128x992x7x7:bf16-f32
python "$warp/ncu/summarise.py" "$OUT"/ncu_*.csv > "$OUT/ncu_summary.txt" 2>&1
grep "ours\|totals" "$OUT/ncu_summary.txt" | cut -c1-200
(cd "$OUT" && tar czf /tmp/out.tgz --exclude=gpu.txt . && find . -mindepth 1 ! -name gpu.txt -delete &&
    mv /tmp/out.tgz .)
