#!/usr/bin/env bash
# On the H200, from the repository root, with the sm_90 wheel of the GROUPS commit in whl_carry/whl.tar.xz: the GPU
# cross-check of every check case launching a reduction over groups of channels, then the A/B of the autotuner's
# candidates before and after (one process). ($1: a label for the outputs; then the A/B's shapes.)
set -uo pipefail
here=$PWD/docs/results/h200-2026-12-04-groups
bash docs/results/h200-2026-12-04-training-suite/install_wheel.sh
cd /tmp || exit 1
label=$1
shift
timeout 150 python "$here/check_grouped.py" > "$OUT/check_grouped$label.log" 2>&1
echo "check rc $?"; grep -E "FAIL|passed|cases" "$OUT/check_grouped$label.log" | tail -n 12
timeout 300 python "$here/ab_groups.py" "$@" > "$OUT/ab_groups$label.log" 2>&1
echo "ab rc $?"; cat "$OUT/ab_groups$label.log"
