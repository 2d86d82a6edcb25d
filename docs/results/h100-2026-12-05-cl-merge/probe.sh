#!/usr/bin/env bash
# On the H200 (the wheel whl_carry/whl.tar.xz installed if it is not): whether a side of the channels_last A/B hangs
# in a training BatchNorm2d step, and in which stage (each case its own process: probe_cl.py prints every stack at
# 20 s), then synccheck of one case under each side but A. Sides as ab.sh names them: A = the wheel's template and
# cache; B = whl_carry/channels_last.rs.j2 with whl_carry/br.tar.xz; B2 = channels_last_b2.rs.j2 with br2.tar.xz.
#     bash probe.sh A B B2
set -uo pipefail
[ -d /tmp/wheel ] || bash docs/results/h200-2026-12-04-training-suite/install_wheel.sh
here=$PWD/docs/results/h100-2026-12-05-cl-merge
site=$(cd /tmp && python -c "import os, rust_kernels; print(os.path.dirname(rust_kernels.__file__))")
tpl=$site/_data/codegen/batch_norm/channels_last.rs.j2
[ -f /tmp/cl_main.rs.j2 ] || cp "$tpl" /tmp/cl_main.rs.j2
declare -A template=([A]=/tmp/cl_main.rs.j2 [B]=$PWD/whl_carry/channels_last.rs.j2 [B2]=$PWD/whl_carry/channels_last_b2.rs.j2)
declare -A carried=([B]=br [B2]=br2)
cases=("32x256x28x28 f32" "32x256x28x28 bf16" "1x96x56x56 f32" "128x64x56x56 bf16" "32x320x8x8 f32")
for side in "$@"; do
  cache=$HOME/.cache/rust_kernels
  if [ "$side" != A ]; then
    cache=/tmp/cache_$side && mkdir -p "$cache" && tar xJf "whl_carry/${carried[$side]}.tar.xz" -C "$cache"
  fi
  cp "${template[$side]}" "$tpl"
  for c in "${cases[@]}"; do
    log="$OUT/probe_${side}_${c/ /_}.log"
    (cd /tmp && RUST_KERNELS_TUNING=off RUST_KERNELS_CACHE_DIR=$cache CUDA_LAUNCH_BLOCKING=1 timeout 40 \
        python "$here/probe_cl.py" $c 20 > "$log" 2>&1)
    echo "== $side $c rc $?"; grep -v "^  File\|^    " "$log" | head -n 12
  done
  if [ "$side" != A ]; then
    (cd /tmp && RUST_KERNELS_TUNING=off RUST_KERNELS_CACHE_DIR=$cache timeout 90 compute-sanitizer --tool synccheck \
        python "$here/probe_cl.py" 32x256x28x28 f32 60 > "$OUT/synccheck_$side.log" 2>&1)
    echo "== synccheck $side rc $?"; grep -v "^  File\|^    " "$OUT/synccheck_$side.log" | head -n 8
  fi
done
cp /tmp/cl_main.rs.j2 "$tpl"
