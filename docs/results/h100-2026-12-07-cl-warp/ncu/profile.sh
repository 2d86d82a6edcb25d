#!/usr/bin/env bash
# ncu of pair.py for each SHAPE:DTYPE given (go.sh's and ../go5.sh's): one CSV a case in $OUT (ncu_SHAPE_DTYPE.csv,
# what summarise.py reads), clocks not locked (--clock-control none), caches flushed between kernels (ncu's default),
# at most 90 s a case. Run with RUST_KERNELS_CACHE_DIR and PYTHONPATH set.
#   bash profile.sh SHAPE:DTYPE...
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
metrics+=,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__registers_per_thread
metrics+=,sm__warps_active.avg.pct_of_peak_sustained_active
for stall in long_scoreboard barrier membar sleeping; do
    metrics+=,smsp__average_warps_issue_stalled_${stall}_per_issue_active.ratio
done
for case in "$@"; do
    shape=${case%%:*} dtype=${case##*:}
    timeout 90 "$ncu" --profile-from-start off --clock-control none --metrics "$metrics" --csv --page raw \
        --print-units base --log-file "$OUT/ncu_${shape}_$dtype.csv" python "$here/pair.py" "$shape" "$dtype" \
        > "$OUT/run_${shape}_$dtype.log" 2>&1
    echo "$shape $dtype rc $? at $SECONDS s"
done
