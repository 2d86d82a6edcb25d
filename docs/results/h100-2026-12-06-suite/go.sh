#!/usr/bin/env bash
# The session's device call, from the repository root, with this commit's sm_90 wheel carried as
# whl_carry/whl.tar.xz: the eager host probe (../h100-2026-12-06-eager-host/probe.py, PROBE_S seconds at most), then
# run.sh's `bench --suite` in what is left of TOTAL_S (none under a minute), both on the installed wheel.
#   bash go.sh [TOTAL_S] [PROBE_S]
set -uo pipefail
total=${1:-570}; probe_s=${2:-200}
repo=$PWD
bash docs/results/h200-2026-12-04-training-suite/install_wheel.sh
mkdir -p "$OUT/probe" /tmp/rkc && xz -dc rkc.tar.xz | tar xf - -C /tmp/rkc  # the models' kernels of other dtypes
(cd /tmp && RUST_KERNELS_CACHE_DIR=/tmp/rkc OUT=$OUT/probe timeout "$probe_s" python "$repo/docs/results/h100-2026-12-06-eager-host/probe.py" \
    > "$OUT/probe/probe.log" 2>&1; echo "probe rc $? at $SECONDS s")
grep -E "^(resnet|mobilenet|  op calls|layer)" "$OUT/probe/probe.log" | cut -c1-600
left=$(( total - SECONDS - 100 ))
[ "$left" -lt 60 ] || INSTALLED=1 bash docs/results/h100-2026-12-06-suite/run.sh "$left"
