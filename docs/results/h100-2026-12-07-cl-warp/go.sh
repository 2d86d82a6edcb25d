#!/usr/bin/env bash
# The session's device call, from the repository root with rkc.tar.xz (made as ../h100-2026-12-07-rules/go.sh says,
# packed_coefficients.patch applied, now also holding the channels_last warp kernels) and the native extension
# carried. On an H200: ../h100-2026-12-07-rules/go.sh (the re-tune of the shipped table). Elsewhere:
#   1. `check` (GPU, against float64) and `sanitize` (memcheck, initcheck) of the channels_last warp kernels;
#   2. `tune` of the channels_last training families (plain and ReLU; f32, bf16 with f32 parameters) over
#      shapes.txt (every candidate: no table for this GPU), exported;
#   3. `bench` of the channels_last training family over bench_shapes.txt (tuned above), with torch.compile.
#   bash go.sh [TOTAL_S]
set -uo pipefail
total=${1:-570}
repo=$PWD; here=$repo/docs/results/h100-2026-12-07-cl-warp
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
if grep -q H200 "$OUT/gpu.txt"; then
    exec bash "$repo/docs/results/h100-2026-12-07-rules/go.sh" "$total"
fi
mkdir -p /tmp/rkc && xz -dc rkc.tar.xz | tar xf - -C /tmp/rkc
export RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$repo/python
echo "unpacked at $SECONDS s"
NEW="batch_norm_2d_warp_forward_channels_last batch_norm_2d_warp_forward_channels_last_act
     batch_norm_2d_warp_backward_channels_last batch_norm_2d_warp_backward_channels_last_act"
timeout 150 python -m rust_kernels check --kernel $NEW > "$OUT/check.log" 2>&1
echo "check rc $? at $SECONDS s"; tail -5 "$OUT/check.log"
timeout 100 python -m rust_kernels sanitize --tools memcheck initcheck --kernel $NEW --timeout 45 --out "$OUT/sanitize" \
    > "$OUT/sanitize.log" 2>&1
echo "sanitize rc $? at $SECONDS s"; tail -4 "$OUT/sanitize.log"
budget=$(( (total - SECONDS - 40) * 55 / 100 ))
timeout $(( budget + 30 )) python -m rust_kernels tune --op batch_norm_2d_training_channels_last \
    batch_norm_2d_training_relu_channels_last --shapes "$here/shapes.txt" --budget "$budget" \
    --export "$OUT/tune_cl_warp.json.gz" > "$OUT/tune.log" 2>&1
echo "tune rc $? at $SECONDS s (budget $budget s)"; tail -c 300 "$OUT/tune.log"; echo
timeout $(( total - SECONDS - 15 )) python -m rust_kernels bench --family batch_norm_2d_training_channels_last \
    --dtype bf16-f32 f32 --shapes $(cat "$here/bench_shapes.txt") --compile-every 1 --skip-launch \
    --out "$OUT/bench" > "$OUT/bench.log" 2>&1
echo "bench rc $? at $SECONDS s"; grep -v "^\[" "$OUT/bench.log" | cut -c1-200 | tail -8
(cd "$OUT" && tar czf /tmp/out.tgz --exclude=gpu.txt . && find . -mindepth 1 ! -name gpu.txt -delete &&
    mv /tmp/out.tgz .)
