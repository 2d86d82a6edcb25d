#!/usr/bin/env bash
# On the GPU machine, from the repository root, with whl_carry/old_src.tar.xz (1df01f3's package and crates) and
# rows_old.tgz / rows.tgz (the row kernels built here before and after, ../h100-2026-12-05-ab/build.sh): ab.py
# before / after / before / after, each its own process; the row kernels' GPU checks after; ncu over
# launch.py's kernels before and after; then, in the time left of SECONDS ($1, default 560), the rows
# benchmark after (ours vs PyTorch eager, torch.compile and a copy).
set -uo pipefail
repo=$PWD
here=$repo/docs/results/h100-2026-12-06-rows-store
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p /tmp/old /tmp/rk_before /tmp/rk_after
tar xJf whl_carry/old_src.tar.xz -C /tmp/old
tar xzf whl_carry/rows_old.tgz -C /tmp/rk_before && tar xzf whl_carry/rows.tgz -C /tmp/rk_after
export RUST_KERNELS_QUIET=1 RUST_KERNELS_CARGO=/bin/false  # every kernel comes from the carried caches
side() {  # side LABEL COMMAND...: the package and cache of that side
    local src=$repo/python; [ "$1" = before ] && src=/tmp/old/python
    PYTHONPATH=$src RUST_KERNELS_CACHE_DIR=/tmp/rk_$1 "${@:2}"
}
for label in before after before after; do
    side $label timeout 90 python "$here/ab.py" time $label >> "$OUT/ab_$label.log" 2>&1; echo "ab $label rc $?"
done
paste -d'\n' "$OUT/ab_before.log" "$OUT/ab_after.log"
side after timeout 60 python examples/rows/run.py --backend cuda > "$OUT/rows_check.log" 2>&1
echo "rows check rc $?"; tail -n 1 "$OUT/rows_check.log"
for label in before after; do
    side $label timeout 120 ncu --set detailed --section WarpStateStats --section SchedulerStats \
        --kernel-name-base demangled --kernel-name regex:'softmax|layer_norm|direct_copy' -o "$OUT/ncu_$label" -f \
        python docs/results/h100-2026-12-06-rows-store/launch.py > "$OUT/ncu_$label.log" 2>&1
    echo "ncu $label rc $?"
    ncu -i "$OUT/ncu_$label.ncu-rep" --page details > "$OUT/ncu_$label.txt" 2>&1
    grep -E "^  [a-z_]+|Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Warp Cycles Per Issued" \
        "$OUT/ncu_$label.txt" | head -n 120
done
left=$(( ${1:-560} - SECONDS ))
[ $left -lt 90 ] && { echo "no time left for the benchmark ($left s)"; exit 0; }
side after timeout $left python examples/rows/run.py --backend cuda --dtype f32 bf16 --bench "$OUT/rows_bench.csv" \
    > "$OUT/rows_bench.log" 2>&1
echo "bench rc $?"; tail -n 10 "$OUT/rows_bench.log"
