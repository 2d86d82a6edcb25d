#!/usr/bin/env bash
# On the GPU machine, from the repository root, with whl_carry/whl.tar.xz and whl_carry/rkc.tgz (build.sh): the
# cooperative launch's GPU test, the persistent kernels checked against float64 and timed (persistent.py), under
# compute-sanitizer, the statistics launch's latency probe, a served key's first call, and the ResNet-50
# channels_last training step with the persistent kernels among the autotuner's candidates.
#   bash run.sh checks             (installs the wheel; the cooperative test, persistent.py, the sanitizer)
#   bash run.sh latency            (after checks: the probe and a served key's first call)
#   bash run.sh models [SECONDS]   (after checks: the model step, in a budget of SECONDS, default 450)
set -uo pipefail
stage=${1:?checks, latency or models}
repo=$PWD
here=$repo/docs/results/h200-2026-12-05-persistent
nvidia-smi --query-gpu=name --format=csv,noheader
case $stage in
checks)
    bash docs/results/h200-2026-12-04-training-suite/install_wheel.sh
    mkdir -p /tmp/rkc && tar xzf whl_carry/rkc.tgz -C /tmp/rkc
    cd /tmp || exit 1
    # the checkout's package, with the carried kernels (the wheel holds the catalogue's only)
    RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$repo/python timeout 60 python -m pytest -q -p no:cacheprovider \
        "$repo/tests/test_cooperative.py" > "$OUT/cooperative.log" 2>&1
    echo "cooperative rc $?"; tail -n 2 "$OUT/cooperative.log"
    timeout 150 python "$here/persistent.py" > "$OUT/persistent.log" 2>&1; echo "persistent rc $?"; cat "$OUT/persistent.log"
    for tool in synccheck racecheck memcheck; do
        timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 --report-api-errors no python "$here/persistent.py" --sanitize \
            > "$OUT/sanitize_$tool.log" 2>&1; echo "$tool rc $?"; tail -n 2 "$OUT/sanitize_$tool.log"
    done ;;
latency)
    cd /tmp || exit 1
    RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$repo/python RUST_KERNELS_QUIET=1 timeout 60 python "$here/probe.py" \
        time > "$OUT/probe.log" 2>&1; echo "probe rc $?"; cat "$OUT/probe.log"
    timeout 60 python "$repo/docs/results/h200-2026-12-04-training-suite/first_calls.py" 40 > "$OUT/first_calls.log" 2>&1
    echo "first_calls rc $?"; tail -n 1 "$OUT/first_calls.log" ;;
models)
    cd /tmp || exit 1
    budget=${2:-450}
    RUST_KERNELS_PERSISTENT=1 timeout $((budget + 50)) python -m rust_kernels bench --models resnet50 --batch 32 128 \
        --bn train --memory-format channels_last --fuse --modes eager graph --out "$OUT/models" --budget "$budget" \
        > "$OUT/models.log" 2>&1
    echo "models rc $?"; tail -n 30 "$OUT/models.log" ;;
esac
