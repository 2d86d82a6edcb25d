#!/usr/bin/env bash
# On the H200, from the repository root, with the sm_90 wheel in whl_carry/whl.tar.xz: ncu over two-launch training
# pairs, the reductions per channel (mode 0 / 1 / 2 / 3) against over groups of channels (mode 4) at the same split.
set -uo pipefail
here=$PWD/docs/results/h200-2026-12-04-groups
bash docs/results/h200-2026-12-04-training-suite/install_wheel.sh
cd /tmp || exit 1
args=("$@")
metrics="gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread"
metrics+=",sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed"
metrics+=",dram__bytes_read.sum,smsp__inst_executed.sum,regex:smsp__warp_issue_stalled_.*_per_warp_active\.pct"
timeout 300 ncu --profile-from-start off --csv --page raw --metrics "$metrics" \
    python "$here/ncu_groups.py" "${args[@]}" > "$OUT/ncu_raw.csv" 2> "$OUT/ncu.err"
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
    print(f"{r[col['Kernel Name']][:34]:34} {num(r,'gpu__time_duration.sum'):9.1f}{units[col['gpu__time_duration.sum']]} grid {r[col['launch__grid_size']]:>6}"
          f" regs {r[col['launch__registers_per_thread']]:>3} warps {num(r,'sm__warps_active.avg.pct_of_peak_sustained_active'):5.1f}%"
          f" dram {num(r,'dram__throughput.avg.pct_of_peak_sustained_elapsed'):5.1f}% read {num(r,'dram__bytes_read.sum'):7.2f}{units[col['dram__bytes_read.sum']]} "
          + " ".join(f"{n[25:-20]}={num(r, n):.0f}" for n in top))
PY
