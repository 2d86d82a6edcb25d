#!/usr/bin/env bash
# NOT RUN: no machine could be started for it (six tries); the session's device time ran out.
# The fifth device call, from the repository root with rkc.tar.xz and the native extension carried. rkc.tar.xz:
# ../h100-2026-12-07-act-groups/build.py's kernels and build.py's (every cooperative instance), from the tree as
# committed (b202a5e: the cooperative kernels' plain loads), exported to one DEST:
#   1. `check` (GPU, against float64) of the cooperative kernels in every dtype key;
#   2. compute-sanitizer memcheck, synccheck and racecheck over them;
#   3. `bench` of the channels_last training op over the first four of coop_shapes.txt (bf16 with f32 parameters,
#      f32; tuned on first use) with torch.compile, in what is left of TOTAL_S.
#   bash go5.sh [TOTAL_S]
set -uo pipefail
total=${1:-400}
repo=$PWD; here=$repo/docs/results/h100-2026-12-07-coop-cap
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
mkdir -p /tmp/rkc && xz -dc rkc.tar.xz | tar xf - -C /tmp/rkc
export RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$repo/python
COOP="batch_norm_2d_cooperative_forward_channels_last batch_norm_2d_cooperative_forward_channels_last_act
      batch_norm_2d_cooperative_backward_channels_last batch_norm_2d_cooperative_backward_channels_last_act"
timeout 100 python -m rust_kernels check --kernel $COOP > "$OUT/check.log" 2>&1
echo "check rc $? at $SECONDS s"; grep -c "^FAIL" "$OUT/check.log"; tail -1 "$OUT/check.log"
timeout 150 python -m rust_kernels sanitize --tools memcheck synccheck racecheck --kernel $COOP --timeout 45 \
    --out "$OUT/sanitize" > "$OUT/sanitize.log" 2>&1
echo "sanitize rc $? at $SECONDS s"; tail -5 "$OUT/sanitize.log"
left=$(( total - SECONDS - 15 ))
if (( left > 30 )); then
    timeout "$left" python -m rust_kernels bench --family batch_norm_2d_training_channels_last --dtype bf16-f32 f32 \
        --shapes $(head -4 "$here/coop_shapes.txt") --compile-every 1 --skip-launch --out "$OUT/bench" \
        > "$OUT/bench.log" 2>&1
    echo "bench rc $? at $SECONDS s"; grep -v "^\[" "$OUT/bench.log" | cut -c1-220 | tail -30
fi
(cd "$OUT" && tar czf /tmp/out.tgz --exclude=gpu.txt . && find . -mindepth 1 ! -name gpu.txt -delete &&
    mv /tmp/out.tgz .)
