#!/usr/bin/env bash
# On the H200 after ab.sh (its caches unpacked): racecheck and synccheck over the families whose plans launch
# channels_last reductions, under side B (cl-shuffle-rows: its template in the installed package, its 768 kernels
# from /tmp/cache_B). $1: seconds.
set -uo pipefail
site=$(cd /tmp && python -c "import os, rust_kernels; print(os.path.dirname(rust_kernels.__file__))")
tpl=$site/_data/codegen/batch_norm/channels_last.rs.j2
cp whl_carry/channels_last.rs.j2 "$tpl"
cd /tmp || exit 1
RUST_KERNELS_CACHE_DIR=/tmp/cache_B timeout "${1:-150}" python -m rust_kernels sanitize --out "$OUT/sanitize_b" \
    --tools racecheck synccheck --timeout $(( ${1:-150} / 2 - 5 )) --family batch_norm_2d_forward \
    batch_norm_2d_backward batch_norm_2d_backward_eval > "$OUT/sanitize_b.log" 2>&1
echo "sanitize B rc $?"; tail -n 6 "$OUT/sanitize_b.log"
cp /tmp/cl_main.rs.j2 "$tpl"
