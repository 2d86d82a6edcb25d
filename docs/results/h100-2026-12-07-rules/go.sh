#!/usr/bin/env bash
# The session's device call, from the repository root with rkc.tar.xz and the native extension carried. rkc.tar.xz,
# made with ../h100-2026-12-07-cl-coefs/packed_coefficients.patch applied:
#   python ../h100-2026-12-07-act-groups/build.py DEST && python ../h100-2026-12-07-cl-coefs/probe.py build DEST &&
#   tar cf - -C DEST kernels by-source | xz -T2 -6 > rkc.tar.xz
# On another GPU: `tune` of the NCHW training families (with and without ReLU, bf16 with f32 parameters) over
# groups_shapes.txt, the suite shapes whose rule training.groups_rule changed (e30f7fb), exported for
# groups_rule.py's --table, and the host cost of the BN + activation eval backward (`bench` on 8x32x8x8); then it
# stops.
# On an H200, with the patch applied to the device's copy of the tree: `tune`, exported for
# scripts/merge_tuning_table.py, of:
#   1. the three channels_last eval forward families over the suite (their kernels' sources changed);
#   2. the grouped eval backward, the cooperative channels_last training kernels and the packed NCHW eval forward
#      over their shapes (../h100-2026-12-07-e2e/go3.sh's three runs);
#   3. every candidate again (--force, one interleaved run) of the NCHW eval backward over warp_shapes.txt, where
#      the rule takes the warp kernel: the shipped table has the split kernel 1.2-1.5x faster at 32x128-992x7x7, an
#      H100 run of every candidate (../h100-2026-12-07-eval-groups/device_h100/plans.csv) the warp kernel as fast or
#      faster (32x544-672x7x7, batch 1);
#   4. the BN + activation eval backward's bf16 keys where the grouped act kernel is new.
#   bash go.sh [TOTAL_S]
set -uo pipefail
total=${1:-570}
repo=$PWD; res=$repo/docs/results
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
mkdir -p /tmp/rkc && xz -dc rkc.tar.xz | tar xf - -C /tmp/rkc
export RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$repo/python
echo "unpacked at $SECONDS s"
tune() {  # NAME SHARE_OF_WHAT_IS_LEFT_% TUNE_ARGS...
    local name=$1 share=$2; shift 2
    local budget=$(( (total - SECONDS - 40) * share / 100 ))
    timeout $(( budget + 30 )) python -m rust_kernels tune "$@" --budget "$budget" \
        --export "$OUT/$name.json.gz" > "$OUT/$name.log" 2>&1
    echo "$name rc $? at $SECONDS s (budget $budget s)"; tail -c 300 "$OUT/$name.log"; echo
}
if ! grep -q H200 "$OUT/gpu.txt"; then
    tune tune_train_groups 100 --op batch_norm_2d_training batch_norm_2d_training_relu --dtype bf16-f32 \
        --shapes $repo/docs/results/h100-2026-12-07-rules/groups_shapes.txt
    timeout 150 python -m rust_kernels bench --family batch_norm_2d_act_eval_backward \
        batch_norm_2d_act_eval_backward_channels_last --dtype bf16-f32 f32 --shapes 8x32x8x8 --compile-every 0 \
        --skip-launch --out "$OUT/host_act" > "$OUT/host_act.log" 2>&1
    echo "host_act rc $? at $SECONDS s"; grep -v "^\[" "$OUT/host_act.log" | cut -c1-200 | tail -20
    (cd "$OUT" && tar czf /tmp/out.tgz --exclude=gpu.txt . && find . -mindepth 1 ! -name gpu.txt -delete &&
        mv /tmp/out.tgz .)
    exit 0
fi
(git apply "$res/h100-2026-12-07-cl-coefs/packed_coefficients.patch" 2>/dev/null ||
    patch -p1 -s < "$res/h100-2026-12-07-cl-coefs/packed_coefficients.patch") && echo "patch applied" || exit 1
tune tune_cl 40 --op batch_norm_2d_eval_forward_channels_last batch_norm_2d_act_eval_forward_channels_last \
    batch_norm_2d_add_relu_eval_forward_channels_last
tune tune_groups 25 --op batch_norm_2d_nchw_backward --shapes $res/h100-2026-12-07-eval-groups/shapes.txt
tune tune_coop 55 --op batch_norm_2d_training_channels_last batch_norm_2d_training_relu_channels_last \
    batch_norm_2d_training_add_relu_channels_last --shapes $res/h100-2026-12-07-e2e/shapes_coop.txt
tune tune_eval 50 --op batch_norm_2d_nchw_forward_inference --shapes $res/h100-2026-12-06-cooperative/shapes_eval.txt
tune tune_warp 40 --op batch_norm_2d_nchw_backward --shapes $repo/docs/results/h100-2026-12-07-rules/warp_shapes.txt \
    --force
tune tune_act 100 --op batch_norm_2d_act_eval_backward --shapes $res/h100-2026-12-07-eval-groups/shapes.txt \
    --dtype bf16-f32
# one archive (the device returns a few files only)
(cd "$OUT" && tar czf /tmp/out.tgz --exclude=gpu.txt . && find . -mindepth 1 ! -name gpu.txt -delete && mv /tmp/out.tgz .)
