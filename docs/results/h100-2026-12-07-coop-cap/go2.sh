#!/usr/bin/env bash
# The second device call (go.sh's `tune B` timed nothing: tune's journal skipped cases whose kernels or candidates had
# changed, fixed in c5a4e4a), carried as go.sh. A, the tree as committed, then B (capped/, grids of up to four CTAs
# an SM), one tuning cache:
#   1. `tune` of the channels_last training op (bf16 with f32 parameters, f32) over coop_shapes.txt and
#      floor_shapes.txt (the cooperative kernels' fixed cost on small tensors), exported after each side (B's export
#      holds both: compare.py);
#   2. on A, ncu of the fastest cooperative forward and backward at 128x512x7x7 bf16 (ncu_coop.py): warp-state and
#      source-level (SASS) stall sampling, where the kernels' fixed ~15 µs goes.
#   bash go2.sh
set -uo pipefail
repo=$PWD; here=$repo/docs/results/h100-2026-12-07-coop-cap
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
mkdir -p /tmp/rkc && xz -dc rkc.tar.xz | tar xf - -C /tmp/rkc
export RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$repo/python
cat "$here/coop_shapes.txt" "$here/floor_shapes.txt" > /tmp/shapes.txt
tune() {  # SIDE
    timeout 150 python -m rust_kernels tune --op batch_norm_2d_training_channels_last --dtype bf16-f32 f32 \
        --shapes /tmp/shapes.txt --budget 120 --export "$OUT/tune_$1.json.gz" > "$OUT/tune_$1.log" 2>&1
    echo "tune $1 rc $? at $SECONDS s"; tail -c 250 "$OUT/tune_$1.log"; echo
}
tune A
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
timeout 150 "$ncu" --profile-from-start off --section SourceCounters --section WarpStateStats --section SpeedOfLight \
    --section Occupancy --section LaunchStats --section SchedulerStats -f -o "$OUT/coop_A" \
    python "$here/ncu_coop.py" 128x512x7x7 bf16-f32 > "$OUT/ncu_coop_A.log" 2>&1
echo "ncu rc $? at $SECONDS s"; grep -v "^==PROF==" "$OUT/ncu_coop_A.log" | tail -4
"$ncu" -i "$OUT/coop_A.ncu-rep" --page details --csv > "$OUT/coop_A_details.csv" 2> "$OUT/coop_A_details.err"
"$ncu" -i "$OUT/coop_A.ncu-rep" --page source --csv --print-source sass > "$OUT/coop_A_sass.csv" 2> "$OUT/coop_A_sass.err"
echo "source page rc $?"; wc -c "$OUT"/coop_A_*.csv; head -c 300 "$OUT/coop_A_sass.err"
cp "$here"/capped/*.toml codegen/batch_norm/
sed -i 's/^COOPERATIVE_CTAS_PER_SM = (2, 3)$/COOPERATIVE_CTAS_PER_SM = (2, 3, 4)/' \
    python/rust_kernels/families/batch_norm/training.py
tune B
(cd "$OUT" && tar czf /tmp/out.tgz --exclude=gpu.txt . && find . -mindepth 1 ! -name gpu.txt -delete &&
    mv /tmp/out.tgz .)
