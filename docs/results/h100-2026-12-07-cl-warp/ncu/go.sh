#!/usr/bin/env bash
# The fourth device call, from the repository root with rkc.tar.xz and the native extension carried: ncu of one
# channels_last training forward + backward per shape, ours, torch.compile's and eager (pair.py): in bf16 (f32
# parameters) where ours is furthest below the 8-pass bound on the H100 suite (../../h100-2026-12-07-rules/device/
# suite/), in f32 where eager (cuDNN) is furthest ahead; clocks not locked (--clock-control none), caches flushed
# between kernels (ncu's default): profile.sh.
#   bash docs/results/h100-2026-12-07-cl-warp/ncu/go.sh
set -uo pipefail
repo=$PWD; here=$repo/docs/results/h100-2026-12-07-cl-warp/ncu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
mkdir -p /tmp/rkc && xz -dc rkc.tar.xz | tar xf - -C /tmp/rkc
export RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$repo/python
bash "$here/profile.sh" 32x512x7x7:bf16-f32 128x512x7x7:bf16-f32 128x112x14x14:bf16-f32 32x128x28x28:bf16-f32 \
    128x992x7x7:bf16-f32 128x384x8x8:f32 128x512x7x7:f32 32x184x14x14:f32
python "$here/summarise.py" "$OUT"/ncu_*.csv > "$OUT/summary.txt" 2>&1; cut -c1-200 "$OUT/summary.txt" | tail -60
(cd "$OUT" && tar czf /tmp/out.tgz --exclude=gpu.txt --exclude=summary.txt . &&
    find . -mindepth 1 ! -name gpu.txt ! -name summary.txt -delete && mv /tmp/out.tgz .)
