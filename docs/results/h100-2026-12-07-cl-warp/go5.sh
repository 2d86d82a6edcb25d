#!/usr/bin/env bash
# NOT RUN (no device time was left): the next call for coop_register_cap.patch, from the repository root with the
# patch applied (`git apply docs/results/h100-2026-12-07-cl-warp/coop_register_cap.patch`), rkc.tar.xz made as
# go2.sh's plus the cooperative kernels rebuilt with the patch (every instance of batch_norm_2d_cooperative_*,
# exported to the same DEST), and the native extension carried. The patch caps the 16-bit cooperative kernels at 80
# registers a thread (ptxas gives them 84-98; capped, they spill 0-16 bytes), so that three 256-thread CTAs fit an SM
# and COOPERATIVE_CTAS_PER_SM's grid of three is resident (ncu, call 4: two, at 22-25 % achieved occupancy).
#   1. `check` of the cooperative kernels;
#   2. `tune` of the channels_last training op in bf16 (f32 parameters) over coop_shapes.txt, exported
#      (coop_grids.py reads it: the best plan at two and at three CTAs an SM against the best other);
#   3. ncu of the pair on three of those shapes (ncu/profile.sh, as ncu/go.sh: against call 4's uncapped figures).
#   bash go5.sh    (about 250 s)
set -uo pipefail
repo=$PWD; here=$repo/docs/results/h100-2026-12-07-cl-warp
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
mkdir -p /tmp/rkc && xz -dc rkc.tar.xz | tar xf - -C /tmp/rkc
export RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$repo/python
COOP="batch_norm_2d_cooperative_forward_channels_last batch_norm_2d_cooperative_forward_channels_last_act
      batch_norm_2d_cooperative_backward_channels_last batch_norm_2d_cooperative_backward_channels_last_act"
timeout 60 python -m rust_kernels check --kernel $COOP > "$OUT/check_coop.log" 2>&1
echo "check rc $? at $SECONDS s"; tail -2 "$OUT/check_coop.log"
timeout 100 python -m rust_kernels tune --op batch_norm_2d_training_channels_last --dtype bf16-f32 \
    --shapes "$here/coop_shapes.txt" --budget 70 --export "$OUT/tune_coop.json.gz" > "$OUT/tune_coop.log" 2>&1
echo "tune rc $? at $SECONDS s"; tail -c 200 "$OUT/tune_coop.log"; echo
bash "$here/ncu/profile.sh" 128x512x7x7:bf16-f32 128x112x14x14:bf16-f32 128x992x7x7:bf16-f32
python "$here/ncu/summarise.py" "$OUT"/ncu_*.csv > "$OUT/summary.txt" 2>&1; grep "ours\|totals" "$OUT/summary.txt" | cut -c1-200
(cd "$OUT" && tar czf /tmp/out.tgz --exclude=gpu.txt --exclude=summary.txt . &&
    find . -mindepth 1 ! -name gpu.txt ! -name summary.txt -delete && mv /tmp/out.tgz .)
