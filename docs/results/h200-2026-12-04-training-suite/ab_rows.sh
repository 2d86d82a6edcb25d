#!/usr/bin/env bash
# On the H200 with the sm_90 wheel of 78c70cf in whl_carry/whl.tar.xz: ab_flat.py on rows that 8-byte packs divide
# and 16-byte ones do not (bf16 14x14, 10x10, 6x6): 8-byte packs (the rule's) against FLAT.
set -uo pipefail
here=$PWD/docs/results/h200-2026-12-04-training-suite
bash "$here/install_wheel.sh"
cd /tmp || exit 1
timeout 120 python "$here/ab_flat.py" 128x1024x14x14 32x256x14x14 128x256x14x14 32x672x14x14 128x96x14x14 \
    1x1024x14x14 128x512x14x14 64x2560x6x6 > "$OUT/ab_rows.log" 2>&1
echo "ab rc $?"; cat "$OUT/ab_rows.log"
