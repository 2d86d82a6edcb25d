#!/usr/bin/env bash
# The third device call, carried as go.sh (go2.sh's ncu step failed: ncu_coop.py asked the driver before torch had
# initialised CUDA): `tune` of 128x512x7x7 bf16 (the tree as committed), then ncu of its fastest cooperative forward
# and backward: warp states and source-level (SASS) stall sampling, where the kernels' fixed ~12 µs goes.
#   bash go3.sh
set -uo pipefail
repo=$PWD; here=$repo/docs/results/h100-2026-12-07-coop-cap
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
mkdir -p /tmp/rkc && xz -dc rkc.tar.xz | tar xf - -C /tmp/rkc
export RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$repo/python
echo 128x512x7x7 > /tmp/shapes.txt
timeout 60 python -m rust_kernels tune --op batch_norm_2d_training_channels_last --dtype bf16-f32 \
    --shapes /tmp/shapes.txt > "$OUT/tune.log" 2>&1
echo "tune rc $? at $SECONDS s"; tail -c 150 "$OUT/tune.log"; echo
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
timeout 200 "$ncu" --profile-from-start off --section SourceCounters --section WarpStateStats --section SpeedOfLight \
    --section Occupancy --section LaunchStats --section SchedulerStats -f -o "$OUT/coop" \
    python "$here/ncu_coop.py" 128x512x7x7 bf16-f32 > "$OUT/ncu_coop.log" 2>&1
echo "ncu rc $? at $SECONDS s"; grep -v "^==PROF==" "$OUT/ncu_coop.log" | tail -4
"$ncu" -i "$OUT/coop.ncu-rep" --page details --csv > "$OUT/coop_details.csv" 2> "$OUT/coop_details.err"
"$ncu" -i "$OUT/coop.ncu-rep" --page source --csv --print-source sass > "$OUT/coop_sass.csv" 2> "$OUT/coop_sass.err"
echo "source page rc $?"; wc -c "$OUT"/coop_*.csv "$OUT/coop.ncu-rep"; head -c 300 "$OUT/coop_sass.err"
(cd "$OUT" && tar czf /tmp/out.tgz --exclude=gpu.txt . && find . -mindepth 1 ! -name gpu.txt -delete &&
    mv /tmp/out.tgz .)
