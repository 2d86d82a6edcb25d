#!/usr/bin/env bash
# The device call as it ran (its first step applied grid_flip.patch, the change since landed: drop that line to run it
# again), from the repository root with rkc.tar.xz and the native extension carried; it applied the patch to the
# device's copy of the tree (side B: grid::sync by one atomic add a CTA and a flipped top bit;
# side A, before/: a count, a reset and a generation word). rkc.tar.xz: build.py's kernels from the tree with the
# patch applied (every dtype key) and from it with before/ copied over rust_kernels/cuda_std/src (`--dtype f32
# bf16-f32`), exported to one DEST:
#   python build.py DEST  &&  (before/ copied over) python build.py DEST --dtype f32 bf16-f32
#   tar cf - -C DEST kernels by-source | xz -T2 -6 > rkc.tar.xz
# 1. ab.py (tune of the channels_last training op, its grid::sync kernels only, bf16 with f32 parameters and f32) over
#    shapes.txt, sides A, B, A, B, each into an empty tuning cache: compare.py's tune_*.json.gz;
# 2. side B: `check` (GPU, against float64) of the persistent and cooperative kernels in every dtype key;
# 3. side B: go2.sh (compute-sanitizer over them) in what is left of TOTAL_S.
#   bash go.sh [TOTAL_S]
set -uo pipefail
total=${1:-560}
repo=$PWD; here=$repo/docs/results/h100-2026-12-07-grid-sync; std=$repo/rust_kernels/cuda_std/src
training=$repo/python/rust_kernels/families/batch_norm/training.py
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
(git apply "$here/grid_flip.patch" 2>/dev/null || patch -p1 -s < "$here/grid_flip.patch") && echo "patch applied" || exit 1
mkdir -p /tmp/rkc && xz -dc rkc.tar.xz | tar xf - -C /tmp/rkc
export RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$repo/python
mkdir -p /tmp/B && cp "$std/grid.rs" /tmp/B/grid.rs && cp "$std/device/grid.rs" /tmp/B/device_grid.rs &&
    cp "$training" /tmp/B/training.py
side() {  # A or B: that side's grid::sync sources (and its barrier workspace: A's two words)
    if [[ $1 == A ]]; then
        cp "$here/before/grid.rs" "$std/grid.rs" && cp "$here/before/device_grid.rs" "$std/device/grid.rs" &&
            sed -i 's/Workspace("barrier", "u32", 1)/Workspace("barrier", "u32", 2)/' "$training"
    else
        cp /tmp/B/grid.rs "$std/grid.rs" && cp /tmp/B/device_grid.rs "$std/device/grid.rs" &&
            cp /tmp/B/training.py "$training"
    fi
}
run() {  # NAME: side ${NAME:0:1}'s tune into an empty tuning cache
    side "${1:0:1}"; rm -rf /tmp/rkc/tuning
    timeout 90 python "$here/ab.py" --op batch_norm_2d_training_channels_last --dtype bf16-f32 f32 \
        --shapes "$here/shapes.txt" --force --budget 60 --export "$OUT/tune_$1.json.gz" > "$OUT/tune_$1.log" 2>&1
    echo "tune $1 rc $? at $SECONDS s"; tail -c 300 "$OUT/tune_$1.log"; echo
}
run A1; run B1; run A2; run B2
side B
timeout 120 python -m rust_kernels check --kernel batch_norm_2d_cooperative_forward_channels_last \
    batch_norm_2d_cooperative_forward_channels_last_act batch_norm_2d_cooperative_backward_channels_last \
    batch_norm_2d_cooperative_backward_channels_last_act batch_norm_2d_persistent_forward_channels_last \
    batch_norm_2d_persistent_forward_channels_last_act batch_norm_2d_persistent_backward_channels_last \
    batch_norm_2d_persistent_backward_channels_last_act > "$OUT/check_B.log" 2>&1
echo "check B rc $? at $SECONDS s"; grep -c "^FAIL" "$OUT/check_B.log"; grep "^FAIL" "$OUT/check_B.log" | head -3 |
    cut -c1-300; tail -2 "$OUT/check_B.log" | cut -c1-300
python "$here/compare.py" "$OUT" | tail -8
left=$(( total - SECONDS - 20 ))
if (( left > 60 )); then
    OUT=$OUT/sanitize_B bash "$here/go2.sh" $(( (left - 30) / 3 )) 2>&1 | tail -9
fi
# (as it ran, `find -delete` stopped at sanitize_B/, which kept its gpu.txt, so the archive stayed in /tmp: a second
# call copied it out; fixed here)
(cd "$OUT" && tar czf /tmp/out.tgz --exclude=./gpu.txt . && rm -rf -- ./* && mv /tmp/out.tgz . &&
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > gpu.txt)
