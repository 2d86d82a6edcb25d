#!/usr/bin/env bash
# On the GPU, from the repository root, with probe.py's kernels in rkc.tgz: ncu over the pairs of `probe.py ncu`
# (the rule's, each block pair's, torch.compile's): each kernel's time, registers, warps active, DRAM throughput and
# top stall reasons.
set -uo pipefail
here=docs/results/h100-2026-12-06-block
mkdir -p /tmp/rkc && tar xzf rkc.tgz -C /tmp/rkc
export RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$PWD/python RUST_KERNELS_TUNING=off RUST_KERNELS_BLOCK=1
metrics="gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread"
metrics+=",sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed"
metrics+=",smsp__inst_executed.sum,regex:smsp__warp_issue_stalled_.*_per_warp_active\.pct"
timeout 200 ncu --profile-from-start off --csv --page raw --metrics "$metrics" \
    python $here/probe.py ncu "${1:-bf16-f32}" > "$OUT/ncu_raw.csv" 2> "$OUT/ncu.err"
echo "ncu rc $?"; tail -n 3 "$OUT/ncu.err"; grep -h ": \[" "$OUT/ncu_raw.csv" | cut -c1-200
python - "$OUT/ncu_raw.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
start = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
h, units, recs = rows[start], rows[start + 1], rows[start + 2:]
col = {n: i for i, n in enumerate(h)}
stalls = [n for n in h if n.startswith("smsp__warp_issue_stalled_") and n.endswith("_per_warp_active.pct")]
num = lambda r, n: float(r[col[n]].replace(",", "") or "nan")
for r in recs:
    top = sorted(stalls, key=lambda n: -num(r, n))[:4]
    print(f"{r[col['Kernel Name']][:48]:48} {num(r,'gpu__time_duration.sum'):9.1f}{units[col['gpu__time_duration.sum']]}"
          f" grid {r[col['launch__grid_size']]:>6} block {r[col['launch__block_size']]:>4} regs {r[col['launch__registers_per_thread']]:>3}"
          f" warps {num(r,'sm__warps_active.avg.pct_of_peak_sustained_active'):5.1f}% dram {num(r,'dram__throughput.avg.pct_of_peak_sustained_elapsed'):5.1f}%"
          f" inst {num(r,'smsp__inst_executed.sum'):9.0f} " + " ".join(f"{n[25:-20]}={num(r, n):.0f}" for n in top))
PY
