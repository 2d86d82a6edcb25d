#!/usr/bin/env bash
# The session's device call, whichever GPU comes (go.sh [TUNE_S] [MODELS_S] [TOTAL_S]), most needed first: on an
# H200 the table's missing entries of test_tuning's shapes (run.sh tune a), the B=128 model step with the persistent
# kernels, then the other shapes' (tune b, TUNE_S); on another GPU (whose entries the H200 table cannot use) the
# model step with and without them (a zero skips a stage); then, in the time left of TOTAL_S, the row kernels' GPU
# checks and the Tile / PackedTile A/B (../h100-2026-12-05-ab, whl_carry/rows.tgz).
set -uo pipefail
here=docs/results/h200-2026-12-06-persistent-tune
bash $here/run.sh install
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
    bash $here/run.sh tune a 60
    [ "${2:-110}" -gt 0 ] && bash $here/run.sh models 1 "${2:-110}" 128
    [ "${1:-200}" -gt 0 ] && bash $here/run.sh tune b "${1:-200}"
elif [ "${2:-120}" -gt 0 ]; then
    for p in 0 1; do bash $here/run.sh models $p "${2:-120}"; done
fi
left=$(( ${3:-560} - SECONDS ))
[ $left -lt 60 ] && { echo "no time left for the rows ($left s)"; exit 0; }
ab=docs/results/h100-2026-12-05-ab
mkdir -p /tmp/rkc2 && tar xzf whl_carry/rows.tgz -C /tmp/rkc2
export PYTHONPATH=$PWD/python RUST_KERNELS_CACHE_DIR=/tmp/rkc2 RUST_KERNELS_QUIET=1
timeout 50 python examples/rows/run.py --backend cuda > "$OUT/rows_check.log" 2>&1
echo "rows rc $?"; tail -n 1 "$OUT/rows_check.log"
timeout $(( left - 55 )) python $ab/ab.py time > "$OUT/ab.log" 2>&1; echo "ab rc $?"; cat "$OUT/ab.log"
