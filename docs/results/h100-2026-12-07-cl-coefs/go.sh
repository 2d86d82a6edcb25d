#!/usr/bin/env bash
# The device call, from the repository root with packed_coefficients.patch applied, with rkc.tar.xz and the native
# extension carried. rkc.tar.xz:
#   python docs/results/h100-2026-12-07-act-groups/build.py DEST && python probe.py build DEST &&
#   tar cf - -C DEST kernels by-source | xz -T2 -6 > rkc.tar.xz
# On any GPU: probe.py (the packed coefficients against the kernel before, every grid, with torch's columns), the GPU
# check of every plan of the changed kernels, compute-sanitizer's memcheck and initcheck over them. On an H200 then:
# the shipped table's entries for the changed kernels (their sources changed, so their old entries are orphaned),
# `tune` over the suite of the three channels_last eval forward families, exported for merge_tuning_table.py, until
# TOTAL_S.
#   bash go.sh [TOTAL_S]
set -uo pipefail
total=${1:-560}
repo=$PWD; here=$repo/docs/results/h100-2026-12-07-cl-coefs
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
mkdir -p /tmp/rkc && xz -dc rkc.tar.xz | tar xf - -C /tmp/rkc
export RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$repo/python
OUT=$OUT RUST_KERNELS_TUNING=off timeout 170 python "$here/probe.py" time > "$OUT/probe.log" 2>&1
echo "probe rc $? at $SECONDS s"; grep -v "^\[" "$OUT/probe.log" | cut -c1-260 | tail -26
changed=(--kernel batch_norm_2d_frozen_forward_channels_last batch_norm_2d_frozen_forward_act
         batch_norm_2d_frozen_forward_add_relu)
timeout 60 python -m rust_kernels check "${changed[@]}" > "$OUT/check.log" 2>&1
echo "check rc $? at $SECONDS s"; tail -n 4 "$OUT/check.log"
timeout 90 python -m rust_kernels sanitize "${changed[@]}" --tools memcheck initcheck --timeout 20 \
    --out "$OUT/sanitize" > "$OUT/sanitize_run.log" 2>&1
echo "sanitize rc $? at $SECONDS s"; tail -n 6 "$OUT/sanitize_run.log"
if grep -q H200 "$OUT/gpu.txt"; then
    budget=$(( total - SECONDS - 40 ))
    timeout $(( budget + 30 )) python -m rust_kernels tune --op batch_norm_2d_eval_forward_channels_last \
        batch_norm_2d_act_eval_forward_channels_last batch_norm_2d_add_relu_eval_forward_channels_last \
        --budget "$budget" --export "$OUT/tune_cl.json.gz" > "$OUT/tune_cl.log" 2>&1
    echo "tune_cl rc $? at $SECONDS s"; tail -c 600 "$OUT/tune_cl.log"; echo
fi
# one archive (the device returns a few files only)
(cd "$OUT" && tar czf /tmp/out.tgz --exclude=gpu.txt . && find . -mindepth 1 ! -name gpu.txt -delete && mv /tmp/out.tgz .)
