#!/usr/bin/env bash
# The device call, from the repository root, with rkc.tar.xz carried there (the kernels of probe.py build, keys.py
# and ../h100-2026-12-06-eval-packs/probe.py build, into one directory) and python/rust_kernels/_host.abi3.so, most needed
# first: the cooperative kernels checked and timed (probe.py time, PROBE_S); on an H200 the shipped table's missing
# entries over shapes.txt (`tune`, TUNE_S, exported to tune.json.gz) and the eval forward's over shapes_eval.txt
# (TUNE_S / 2, tune_eval.json.gz); the packed eval forward's probe; then the
# cooperative pairs under compute-sanitizer (synccheck, racecheck, memcheck) in what is left.
#   bash go.sh [TOTAL_S] [PROBE_S] [TUNE_S] [REST]     (REST 0: the probe and the tuning only)
set -uo pipefail
total=${1:-500}; probe_s=${2:-200}; tune_s=${3:-110}; rest=${4:-1}
here=docs/results/h100-2026-12-06-cooperative
mkdir -p /tmp/rkc && xz -dc rkc.tar.xz | tar xf - -C /tmp/rkc
export RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$PWD/python RUST_KERNELS_TUNING=off
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
left() { echo $(( total - SECONDS )); }
mkdir -p "$OUT/cooperative" "$OUT/eval_packs"
OUT=$OUT/cooperative timeout "$probe_s" python $here/probe.py time > "$OUT/cooperative/probe.log" 2>&1
echo "cooperative rc $? at $SECONDS s"; grep -v "^\[" "$OUT/cooperative/probe.log" | cut -c1-330 | tail -40
if grep -q H200 "$OUT/gpu.txt"; then
    families=(batch_norm_2d_training_channels_last batch_norm_2d_training_relu_channels_last
              batch_norm_2d_training_add_relu_channels_last)
    timeout $(( tune_s + 40 )) env -u RUST_KERNELS_TUNING -u RUST_KERNELS_QUIET python -m rust_kernels tune \
        --op "${families[@]}" --shapes $here/shapes.txt --budget "$tune_s" --export "$OUT/tune.json.gz" \
        > "$OUT/tune.log" 2>&1
    echo "tune rc $? at $SECONDS s"; tail -c 600 "$OUT/tune.log"; echo
    # the packed eval forward's entries: the suite shapes whose rows no pack divides (shapes_eval.txt)
    timeout $(( tune_s / 2 + 40 )) env -u RUST_KERNELS_TUNING -u RUST_KERNELS_QUIET python -m rust_kernels tune \
        --op batch_norm_2d_nchw_forward_inference --shapes $here/shapes_eval.txt --budget $(( tune_s / 2 )) \
        --export "$OUT/tune_eval.json.gz" > "$OUT/tune_eval.log" 2>&1
    echo "tune eval rc $? at $SECONDS s"; tail -c 400 "$OUT/tune_eval.log"; echo
fi
[ "$rest" = 0 ] && exit 0
OUT=$OUT/eval_packs timeout $(( $(left) * 60 / 100 )) python docs/results/h100-2026-12-06-eval-packs/probe.py time \
    > "$OUT/eval_packs/probe.log" 2>&1
echo "eval packs rc $? at $SECONDS s"; grep -v "^\[" "$OUT/eval_packs/probe.log" | cut -c1-330 | tail -22
for tool in synccheck racecheck memcheck; do
    [ "$(left)" -gt 20 ] || break
    timeout $(( ($(left) - 10) / 2 )) compute-sanitizer --tool $tool --error-exitcode 9 --report-api-errors no \
        python $here/probe.py sanitize > "$OUT/cooperative/sanitize_$tool.log" 2>&1
    echo "$tool rc $? at $SECONDS s"; tail -n 3 "$OUT/cooperative/sanitize_$tool.log"
done
