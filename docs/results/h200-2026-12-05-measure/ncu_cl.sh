#!/usr/bin/env bash
# On the H200, from the repository root, with the sm_90 wheel in whl_carry/whl.tar.xz: ncu over channels_last
# training forward + backward pairs (the runtime's plans) on the suite's weakest shapes, each kernel's time,
# occupancy, DRAM throughput and top stall reasons; then the pairs' event times without ncu.
set -uo pipefail
here=$PWD/docs/results/h200-2026-12-05-measure
bash docs/results/h200-2026-12-04-training-suite/install_wheel.sh
cd /tmp || exit 1
shapes=(1x32x35x35:bf16 1x256x56x56:bf16 32x112x14x14:f32 32x184x14x14:bf16 128x320x8x8:bf16)
metrics="gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread"
metrics+=",sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed"
metrics+=",smsp__inst_executed.sum,regex:smsp__warp_issue_stalled_.*_per_warp_active\.pct"
timeout 150 ncu --profile-from-start off --csv --page raw --metrics "$metrics" \
    python "$here/ncu_cl.py" "${shapes[@]}" > "$OUT/ncu_raw.csv" 2> "$OUT/ncu.err"
echo "ncu rc $?"; tail -n 3 "$OUT/ncu.err"
python - "$OUT/ncu_raw.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
start = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
h, units, recs = rows[start], rows[start + 1], rows[start + 2:]
col = {n: i for i, n in enumerate(h)}
stalls = [n for n in h if n.startswith("smsp__warp_issue_stalled_") and n.endswith("_per_warp_active.pct")]
num = lambda r, n: float(r[col[n]].replace(",", "") or "nan")
for r in recs:
    top = sorted(stalls, key=lambda n: -num(r, n))[:3]
    print(f"{r[col['Kernel Name']][:44]:44} {num(r,'gpu__time_duration.sum'):9.1f}{units[col['gpu__time_duration.sum']]}"
          f" grid {r[col['launch__grid_size']]:>6} block {r[col['launch__block_size']]:>4} regs {r[col['launch__registers_per_thread']]:>3}"
          f" warps {num(r,'sm__warps_active.avg.pct_of_peak_sustained_active'):5.1f}% dram {num(r,'dram__throughput.avg.pct_of_peak_sustained_elapsed'):5.1f}% "
          + " ".join(f"{n[25:-20]}={num(r, n):.0f}" for n in top))
PY
timeout 60 python "$here/ncu_cl.py" "${shapes[@]}"
# The row kernels at 512 and 1024 columns over (threads, elements) plans (rows_short.py; rkc2.tgz: its kernels,
# built here by `RUST_KERNELS_CACHE_DIR=rkc2 python rows_short.py build`, then `tar czf rkc2.tgz -C rkc2 kernels
# by-source`).
cd - > /dev/null || exit 1
mkdir -p /tmp/rkc2 && tar xzf rkc2.tgz -C /tmp/rkc2
PYTHONPATH=$PWD/python RUST_KERNELS_CACHE_DIR=/tmp/rkc2 RUST_KERNELS_QUIET=1 timeout 60 python "$here/rows_short.py" time
