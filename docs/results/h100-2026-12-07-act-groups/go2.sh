#!/usr/bin/env bash
# The session's next device call, from the repository root, with rkc.tar.xz (build.py), the native extension and
# old_python/ (the package of 5f4d564, before the grouped act kernel, with the same native extension) carried.
#   On an H200: the shipped table's missing entries (../h100-2026-12-07-e2e/go3.sh, TUNE_S; then the BN + ReLU eval
#     backward's keys over ../h100-2026-12-07-eval-groups/shapes.txt, ACT_S), exported for merge_tuning_table.py.
#   probe_act.py: the rule (grouped_rule: the grouped act kernel from 4 channels an SM on) against every candidate.
#   A frozen-BN fine-tuning step, NCHW, fused (`convert(fuse=True)`: BN + ReLU6 in one op), B = 128, bf16: MobileNetV2
#     (its 7x7 and 14x14 BN + ReLU6 layers of 576 to 1 280 channels take the grouped act kernel; ResNet-50's of 256 and
#     512 do not), eager and CUDA graph, ours against torch's in one process, with this commit's package and with
#     old_python's (each its own build and tuning cache, tuned on first use), each half of what is left of TOTAL_S.
#   bash go2.sh [TOTAL_S] [TUNE_S] [ACT_S]
set -uo pipefail
total=${1:-560}; tune_s=${2:-200}; act_s=${3:-30}
repo=$PWD; here=$repo/docs/results/h100-2026-12-07-act-groups
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
mkdir -p /tmp/rkc && xz -dc rkc.tar.xz | tar xf - -C /tmp/rkc && cp -r /tmp/rkc /tmp/rkc_old
export RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$repo/python
if grep -q H200 "$OUT/gpu.txt"; then
    OUT=$OUT bash $repo/docs/results/h100-2026-12-07-e2e/go3.sh "$tune_s"
    timeout $(( act_s + 30 )) python -m rust_kernels tune --op batch_norm_2d_act_eval_backward \
        --shapes $repo/docs/results/h100-2026-12-07-eval-groups/shapes.txt --dtype bf16-f32 --budget "$act_s" \
        --export "$OUT/tune_act.json.gz" > "$OUT/tune_act.log" 2>&1
    echo "tune_act rc $? at $SECONDS s"; tail -c 400 "$OUT/tune_act.log"; echo
fi
OUT=$OUT RUST_KERNELS_TUNING=off timeout 100 python $here/probe_act.py > "$OUT/probe_act.log" 2>&1
echo "probe_act rc $? at $SECONDS s"; grep -v "^\[" "$OUT/probe_act.log" | cut -c1-240 | tail -14
models_s=$(( (total - SECONDS - 70) / 2 ))
models() {  # NAME
    timeout $(( models_s + 30 )) python -m rust_kernels bench --models mobilenet_v2 --batch 128 --bn frozen \
        --dtype bf16 --fuse --modes eager graph --profile-steps 0 --budget "$models_s" --out "$OUT/$1" \
        > "$OUT/$1.log" 2>&1
    echo "$1 rc $? at $SECONDS s"; grep -A 8 "^model " "$OUT/$1.log" | cut -c1-150
}
models frozen_fused
RUST_KERNELS_CACHE_DIR=/tmp/rkc_old PYTHONPATH=$repo/old_python models frozen_fused_before
# one archive (the device returns a few files only)
(cd "$OUT" && tar czf /tmp/out.tgz --exclude=gpu.txt . && find . -mindepth 1 ! -name gpu.txt -delete && mv /tmp/out.tgz .)
