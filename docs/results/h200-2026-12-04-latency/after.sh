#!/usr/bin/env bash
# On the H200, from the repository root, with the sm_90 wheel of the commit (the tuned table merged): ncu over the
# NCHW one-launch kernels with the CTA sizes the table served before the change (device/before), then ours vs eager
# vs torch.compile on the small and mid-sized NCHW suite shapes of 12-04's weakest list (bench_shapes.txt).
set -uo pipefail
here=$PWD/docs/results/h200-2026-12-04-latency
bash docs/results/h200-2026-12-04-training-suite/install_wheel.sh
cd /tmp || exit 1
shapes=(1x208x14x14:bf16@256,256 1x256x56x56:bf16@128,512 32x448x8x8:bf16@128,256 32x672x7x7:bf16@128,128)
metrics="gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread"
metrics+=",sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed"
metrics+=",sm__cycles_elapsed.max,smsp__inst_executed.sum,regex:smsp__warp_issue_stalled_.*_per_warp_active\.pct"
timeout 200 ncu --profile-from-start off --csv --page raw --metrics "$metrics" \
    python "$here/latency_kernels.py" "${shapes[@]}" > "$OUT/ncu_fused_raw.csv" 2> "$OUT/ncu_fused.err"
echo "ncu rc $?"; tail -n 2 "$OUT/ncu_fused.err"
python "$here/summary.py" "$OUT/ncu_fused_raw.csv" "${shapes[@]}" | grep -v "at::" | tee "$OUT/latency_fused.txt"
timeout 330 python -m rust_kernels bench --family batch_norm_2d_training batch_norm_2d_training_relu \
    --shapes $(tr '\n' ' ' < "$here/bench_shapes.txt") --dtype bf16-f32 f32 --compile-every 2 --skip-launch \
    --budget 280 --out "$OUT/bench_small" > "$OUT/bench_small.log" 2>&1
echo "bench rc $?"; grep -E "fraction of bound" "$OUT/bench_small.log"
