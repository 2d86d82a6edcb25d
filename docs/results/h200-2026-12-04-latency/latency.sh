#!/usr/bin/env bash
# On the H200, from the repository root, with the sm_90 wheel in whl_carry/whl.tar.xz: ncu over one training-mode
# forward + backward per shape (ours as the shipped table serves it, then torch eager), the kernels' durations,
# grids, registers, occupancy, throughput and warp stall reasons (latency_kernels.py, summary.py).
set -uo pipefail
here=$PWD/docs/results/h200-2026-12-04-latency
bash docs/results/h200-2026-12-04-training-suite/install_wheel.sh
cd /tmp || exit 1
shapes=(1x208x14x14:bf16 1x256x56x56:bf16 32x448x8x8:bf16 32x672x7x7:bf16 1x96x56x56:f32:cl 32x112x14x14:f32:cl
        32x112x14x14:bf16:cl 128x320x8x8:bf16:cl)
metrics="gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread"
metrics+=",sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed"
metrics+=",sm__cycles_elapsed.max,smsp__inst_executed.sum,regex:smsp__warp_issue_stalled_.*_per_warp_active\.pct"
timeout 400 ncu --profile-from-start off --csv --page raw --metrics "$metrics" \
    python "$here/latency_kernels.py" "${shapes[@]}" > "$OUT/ncu_raw.csv" 2> "$OUT/ncu.err"
echo "ncu rc $?"; tail -n 3 "$OUT/ncu.err"
python "$here/summary.py" "$OUT/ncu_raw.csv" "${shapes[@]}" | tee "$OUT/latency.txt"
