#!/usr/bin/env bash
# On the GPU (the wheel installed if it is not): ncu over ncu_step.py's channels_last training steps, ours (the
# rule's plans) and torch's, then ncu_rows.py's table per kernel. ncu serialises kernels and flushes caches between
# them: cold-kernel times.
set -uo pipefail
[ -d /tmp/wheel ] || bash docs/results/h200-2026-12-04-training-suite/install_wheel.sh
here=$PWD/docs/results/h100-2026-12-05-cl-merge
metrics=gpu__time_duration.sum,launch__registers_per_thread,dram__bytes_read.sum,dram__bytes_write.sum
metrics+=,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active
metrics+=,sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_elapsed.avg
for stall in long_scoreboard barrier membar; do
  metrics+=,smsp__average_warps_issue_stalled_${stall}_per_issue_active.ratio
done
cd /tmp || exit 1
for side in ours torch; do
  RUST_KERNELS_TUNING=off timeout 100 ncu --profile-from-start off --metrics "$metrics" --csv --page raw \
      --print-units base --log-file "$OUT/ncu_$side.csv" python "$here/ncu_step.py" $side > "$OUT/ncu_$side.log" 2>&1
  echo "ncu $side rc $?"; tail -n 3 "$OUT/ncu_$side.log"
  (cd "$here" && python ncu_rows.py "$OUT/ncu_$side.csv") | tee "$OUT/rows_$side.txt"
done
