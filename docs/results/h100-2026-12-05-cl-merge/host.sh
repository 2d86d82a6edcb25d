#!/usr/bin/env bash
# On the GPU (the wheel installed if it is not): host_profile.py, where a converted ResNet-50 training step's host
# time goes.
set -uo pipefail
[ -d /tmp/wheel ] || bash docs/results/h200-2026-12-04-training-suite/install_wheel.sh
here=$PWD/docs/results/h100-2026-12-05-cl-merge
cd /tmp && timeout 200 python "$here/host_profile.py" > "$OUT/host_profile.log" 2>&1
echo "rc $?"; head -n 8 "$OUT/host_profile.log"
