#!/usr/bin/env bash
# The device call, from the repository root, with rkc.tar.xz carried there (probe.py build's kernels) and
# python/rust_kernels/_host.abi3.so: probe.py time, output to $OUT.
set -uo pipefail
mkdir -p /tmp/rkc && xz -dc rkc.tar.xz | tar xf - -C /tmp/rkc
export RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$PWD/python RUST_KERNELS_TUNING=off
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout "${1:-200}" python docs/results/h100-2026-12-06-eval-packs/probe.py time > "$OUT/probe.log" 2>&1
echo "probe rc $?"; grep -v "^\[" "$OUT/probe.log" | cut -c1-330 | tail -25
