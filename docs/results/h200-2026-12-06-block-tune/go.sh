#!/usr/bin/env bash
# The session's device call, from the repository root, with rkc.tar.xz carried there (the sm_90 kernels of
# ../h100-2026-12-06-block/probe.py build, ../h100-2026-12-06-silu/check_silu.py build,
# ../h100-2026-12-06-hardswish/plans_f32.py build and build.py, into one directory). Most needed first:
#   on an H200: the block kernels' timings for the shipped table and the rule's pairs (../h100-2026-12-06-block/go.sh
#     "tune rule", in RULE_S seconds), then the rest in what is left;
#   anywhere: the model benchmark's gradient check against float64 (its GPU test, then `bench --models` ResNet-50
#     and MobileNetV2, B = 32, BN training, fused, f32 and bf16), the 16-bit SiLU GPU check (check_silu.py run) and
#     every MobileNetV3 f32 plan against float64 (plans_f32.py).
#   bash go.sh [TOTAL_S] [RULE_S]
set -uo pipefail
total=${1:-580}; rule_s=${2:-220}
mkdir -p /tmp/rkc && xz -dc rkc.tar.xz | tar xf - -C /tmp/rkc && tar czf rkc.tgz -C /tmp/rkc .
export RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$PWD/python
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
left() { echo $(( total - SECONDS )); }
if grep -q H200 "$OUT/gpu.txt"; then
    bash docs/results/h100-2026-12-06-block/go.sh 150 "$rule_s" "tune rule"
fi
timeout 60 python -m pytest -q -p no:cacheprovider tests/test_bench_models.py -k gpu > "$OUT/pytest_bench.log" 2>&1
echo "pytest rc $? at $SECONDS s"; tail -n 3 "$OUT/pytest_bench.log"
budget=$(( ($(left) - 20) / 2 ))
timeout $(( budget + 30 )) python -m rust_kernels bench --models resnet50 mobilenet_v2 --batch 32 --bn train \
    --dtype f32 bf16 --fuse --modes eager graph --profile-steps 0 --budget "$budget" --out "$OUT/models" \
    > "$OUT/models.log" 2>&1
echo "models rc $? at $SECONDS s"; grep -A 12 "^model " "$OUT/models.log" | cut -c1-150; grep -A 8 "^ours vs torch" \
    "$OUT/models.log" | cut -c1-200
RUST_KERNELS_TUNING=off timeout $(( ($(left) - 10) * 3 / 5 )) \
    python docs/results/h100-2026-12-06-silu/check_silu.py run > "$OUT/check_silu.log" 2>&1
echo "check_silu rc $? at $SECONDS s"; tail -n 6 "$OUT/check_silu.log" | cut -c1-200
RUST_KERNELS_TUNING=off timeout $(( $(left) - 5 )) \
    python docs/results/h100-2026-12-06-hardswish/plans_f32.py > "$OUT/plans_f32.log" 2>&1
echo "plans_f32 rc $? at $SECONDS s"; tail -n 2 "$OUT/plans_f32.log"; grep -c "OVER 10x" "$OUT/plans_f32.log"
