#!/usr/bin/env bash
# On the H200, from the repository root, with the sm_90 wheel of the commit: the four keys whose one-launch
# candidates fused.sh's ncu run had timed under the profiler (dropped from its export) timed again, exported, then
# ours vs eager vs torch.compile on them; and whether ncu sets CUDA_INJECTION64_PATH (the tuner's profiler guard).
set -uo pipefail
here=$PWD/docs/results/h200-2026-12-04-latency
bash docs/results/h200-2026-12-04-training-suite/install_wheel.sh
cd /tmp || exit 1
ncu --profile-from-start off python -c "import os; print('under ncu: CUDA_INJECTION64_PATH =', os.environ.get('CUDA_INJECTION64_PATH'))" 2>&1 | grep "under ncu"
timeout 100 env -u RUST_KERNELS_QUIET python -m rust_kernels tune --op batch_norm_2d_training --dtype bf16-f32 \
    --shapes "$here/retune_shapes.txt" --export "$OUT/tune_retune.json.gz" > "$OUT/tune_retune.log" 2>&1
echo "tune rc $?"; tail -c 300 "$OUT/tune_retune.log"
timeout 200 python -m rust_kernels bench --family batch_norm_2d_training \
    --shapes $(tr '\n' ' ' < "$here/retune_shapes.txt") --dtype bf16-f32 --compile-every 1 --skip-launch \
    --budget 150 --out "$OUT/bench_retune" > "$OUT/bench_retune.log" 2>&1
echo "bench rc $?"; grep -E "fraction of bound" "$OUT/bench_retune.log"
