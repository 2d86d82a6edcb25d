#!/usr/bin/env bash
# The session's device call, from the repository root, with rkc.tar.xz (build.py) and the native extension carried.
#   On an H200: the shipped table's missing entries (../h100-2026-12-07-e2e/go3.sh: the grouped eval backward, the
#     cooperative kernels to 40 MiB, the packed eval forward; exported for scripts/merge_tuning_table.py), TUNE_S.
#     Then the BN + ReLU eval backward's keys over ../h100-2026-12-07-eval-groups/shapes.txt, where the table lacks
#     the new grouped act kernel's times (exported too), ACT_S.
#   The grouped eval backward through an activation (new): its GPU check, then probe_act.py (every candidate of the
#     BN + ReLU eval backward against torch, torch.compile and the bound).
#   On another GPU also: the grouped act kernel's sanitizer run, and the cooperative kernels' shapes past 24 MiB left
#     untimed on 12-07 (coop_bound.py from its fifth shape).
#   bash go.sh [TOTAL_S] [TUNE_S] [ACT_S]
set -uo pipefail
total=${1:-580}; tune_s=${2:-280}; act_s=${3:-50}
repo=$PWD; here=$repo/docs/results/h100-2026-12-07-act-groups; e2e=$repo/docs/results/h100-2026-12-07-e2e
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
h200=$(grep -c H200 "$OUT/gpu.txt")
if [ "$h200" = 1 ]; then
    OUT=$OUT bash $e2e/go3.sh "$tune_s"
    RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$repo/python timeout $(( act_s + 30 )) python -m rust_kernels tune \
        --op batch_norm_2d_act_eval_backward --shapes $repo/docs/results/h100-2026-12-07-eval-groups/shapes.txt \
        --dtype bf16-f32 --budget "$act_s" --export "$OUT/tune_act.json.gz" > "$OUT/tune_act.log" 2>&1
    echo "tune_act rc $? at $SECONDS s"; tail -c 400 "$OUT/tune_act.log"; echo
else
    mkdir -p /tmp/rkc && xz -dc rkc.tar.xz | tar xf - -C /tmp/rkc
fi
export RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$repo/python
left() { echo $(( total - SECONDS )); }
act=(--family batch_norm_2d_act_eval_backward --kernel batch_norm_2d_frozen_backward_grouped_act)
timeout 60 python -m rust_kernels check "${act[@]}" > "$OUT/check_act.log" 2>&1
echo "check rc $? at $SECONDS s"; tail -n 9 "$OUT/check_act.log"
OUT=$OUT RUST_KERNELS_TUNING=off timeout 100 python $here/probe_act.py > "$OUT/probe_act.log" 2>&1
echo "probe_act rc $? at $SECONDS s"; grep -v "^\[" "$OUT/probe_act.log" | cut -c1-300 | tail -16
if [ "$h200" != 1 ]; then
    timeout 70 python -m rust_kernels sanitize "${act[@]}" --tools memcheck racecheck synccheck --timeout 20 \
        --out "$OUT/sanitize" > "$OUT/sanitize_run.log" 2>&1
    echo "sanitize rc $? at $SECONDS s"; tail -n 6 "$OUT/sanitize_run.log"
    RUST_KERNELS_TUNING=off timeout $(( $(left) - 20 )) python $e2e/coop_bound.py time 4 > "$OUT/coop_bound.log" 2>&1
    echo "coop_bound rc $? at $SECONDS s"; grep -v "^\[" "$OUT/coop_bound.log" | cut -c1-330 | tail -24
fi
# one archive (the device returns a few files only)
(cd "$OUT" && tar czf /tmp/out.tgz --exclude=gpu.txt . && find . -mindepth 1 ! -name gpu.txt -delete && mv /tmp/out.tgz .)
