#!/usr/bin/env bash
# The session's device call, from the repository root with rkc.tar.xz (build.py) and the native extension carried.
# It ran with packed_coefficients.patch applied to 1145639's tree; from 4e2b740 on, run it on the tree as it is: the
# _packed kernels are the eval forwards' new candidates, which `tune` times. On an H200, `tune` exported for scripts/merge_tuning_table.py, most
# needed first:
#   1. the channels_last training families over shapes_cl_train.txt: the suite shapes whose keys the shipped table
#      lacks candidates of (the persistent kernels' entries, dropped by 12-07's grid::sync, and the cooperative
#      kernels' larger shapes); ../h200-2026-12-06-persistent-tune/unserved.py's output;
#   2. the three channels_last eval forward families over the suite (the packed kernels' sources changed);
#   3. the rest of ../h100-2026-12-07-rules/go.sh's H200 list, in what is left of TOTAL_S.
# On another GPU (whose entries the H200 table cannot use): the GPU check of the three kernels whose coefficients now
# come in packs, then of the kernels that call grid::sync, every dtype key, which 12-07 left unfinished
# (../h100-2026-12-07-grid-sync/), when asked (`checks`; `rest`: the family that run did not finish; else it stops).
#   bash go.sh [TOTAL_S] [checks|rest]
set -uo pipefail
total=${1:-560}
repo=$PWD; res=$repo/docs/results
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
[[ -d /tmp/rkc/kernels ]] || { mkdir -p /tmp/rkc && xz -dc rkc.tar.xz | tar xf - -C /tmp/rkc; }
export RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$repo/python
echo "unpacked at $SECONDS s"
left() { echo $(( total - SECONDS - 30 )); }
check() {  # NAME SECONDS CHECK_ARGS...
    local name=$1 s=$2; shift 2
    timeout "$s" python -m rust_kernels check "$@" > "$OUT/$name.log" 2>&1
    echo "$name rc $? at $SECONDS s"; grep -v "^\[" "$OUT/$name.log" | grep -i "fail\|passed\|interrupted" | tail -5
}
tune() {  # NAME SHARE_OF_WHAT_IS_LEFT_% TUNE_ARGS...
    local name=$1 share=$2; shift 2
    local budget=$(( $(left) * share / 100 ))
    (( budget > 10 )) || { echo "$name skipped"; return; }
    timeout $(( budget + 30 )) python -m rust_kernels tune "$@" --budget "$budget" \
        --export "$OUT/$name.json.gz" > "$OUT/$name.log" 2>&1
    echo "$name rc $? at $SECONDS s (budget $budget s)"; tail -c 300 "$OUT/$name.log"; echo
}
if grep -q H200 "$OUT/gpu.txt"; then
    tune tune_cl_train 35 --op batch_norm_2d_training_channels_last batch_norm_2d_training_relu_channels_last \
        batch_norm_2d_training_add_relu_channels_last --shapes "$res/h100-2026-12-07-checks/shapes_cl_train.txt"
    tune tune_cl 45 --op batch_norm_2d_eval_forward_channels_last batch_norm_2d_act_eval_forward_channels_last \
        batch_norm_2d_add_relu_eval_forward_channels_last
    tune tune_groups 20 --op batch_norm_2d_nchw_backward --shapes $res/h100-2026-12-07-eval-groups/shapes.txt
    tune tune_coop 40 --op batch_norm_2d_training_channels_last batch_norm_2d_training_relu_channels_last \
        batch_norm_2d_training_add_relu_channels_last --shapes $res/h100-2026-12-07-e2e/shapes_coop.txt
    tune tune_eval 40 --op batch_norm_2d_nchw_forward_inference --shapes $res/h100-2026-12-06-cooperative/shapes_eval.txt
    tune tune_warp 50 --op batch_norm_2d_nchw_backward --shapes $res/h100-2026-12-07-rules/warp_shapes.txt --force
    tune tune_act 100 --op batch_norm_2d_act_eval_backward --shapes $res/h100-2026-12-07-eval-groups/shapes.txt \
        --dtype bf16-f32
elif [[ ${2:-} == checks ]]; then
    check check_packed 90 --kernel batch_norm_2d_frozen_forward_channels_last batch_norm_2d_frozen_forward_act \
        batch_norm_2d_frozen_forward_add_relu
    check check_grid_sync "$(left)" --kernel batch_norm_2d_cooperative_forward_channels_last \
        batch_norm_2d_cooperative_forward_channels_last_act batch_norm_2d_cooperative_backward_channels_last \
        batch_norm_2d_cooperative_backward_channels_last_act batch_norm_2d_persistent_forward_channels_last \
        batch_norm_2d_persistent_forward_channels_last_act batch_norm_2d_persistent_backward_channels_last \
        batch_norm_2d_persistent_backward_channels_last_act
elif [[ ${2:-} == rest ]]; then  # the family the `checks` run's check_grid_sync did not finish
    check check_grid_sync_rest "$(left)" --family batch_norm_2d_act_backward --kernel \
        batch_norm_2d_cooperative_backward_channels_last_act batch_norm_2d_persistent_backward_channels_last_act
fi
# one archive (the device returns a few files only)
(cd "$OUT" && tar czf /tmp/out.tgz --exclude=./gpu.txt . && rm -rf -- ./*.log ./*.json.gz && mv /tmp/out.tgz .)
