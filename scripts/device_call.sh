# Steps of a device call (`run` on the GPU machine, from the repository root), sourced by docs/results/*/go.sh:
#   source scripts/device_call.sh; device_begin TOTAL_S; device_tune ...; device_step ...; device_end
# The machine has no Rust: the kernels come built, as rkc.tar.xz in the checkout's root (a build cache's `kernels`
# and `by-source`), and the native extension is carried. Each step's log goes to $OUT; device_end packs them into
# one archive, since the machine returns a few files only.

# Names the GPU ($OUT/gpu.txt), unpacks the kernels once per machine, points the package at them; TOTAL_S is the
# call's time, which device_tune shares out.
device_begin() {
    device_total=${1:-560}
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
    [[ -d /tmp/rkc/kernels ]] || { mkdir -p /tmp/rkc && xz -dc rkc.tar.xz | tar xf - -C /tmp/rkc; }
    export RUST_KERNELS_CACHE_DIR=/tmp/rkc PYTHONPATH=$PWD/python
    echo "unpacked at $SECONDS s"
}

device_on_h200() { grep -q H200 "$OUT/gpu.txt"; }

# `python -m rust_kernels tune ARGS...` with SHARE % of the call's time left (30 s kept for packing), exported to
# $OUT/NAME.json.gz for scripts/merge_tuning_table.py.
device_tune() {  # NAME SHARE_% TUNE_ARGS...
    local name=$1 share=$2; shift 2
    local budget=$(( (device_total - SECONDS - 30) * share / 100 ))
    (( budget > 10 )) || { echo "$name skipped"; return; }
    timeout $(( budget + 30 )) python -m rust_kernels tune "$@" --budget "$budget" \
        --export "$OUT/$name.json.gz" > "$OUT/$name.log" 2>&1
    echo "$name rc $? at $SECONDS s (budget $budget s)"; tail -c 300 "$OUT/$name.log"; echo
}

# `python -m rust_kernels ARGS...` for at most SECONDS, its log's last lines (progress lines left out) shown.
device_step() {  # NAME SECONDS ARGS...
    local name=$1 s=$2; shift 2
    (( s > 10 )) || { echo "$name skipped"; return; }
    timeout "$s" python -m rust_kernels "$@" > "$OUT/$name.log" 2>&1
    echo "$name rc $? at $SECONDS s"; tr '\r' '\n' < "$OUT/$name.log" | grep -v "^\[" | tail -4
}

# Everything under $OUT but gpu.txt into $OUT/out.tgz.
device_end() {
    (cd "$OUT" && tar czf /tmp/out.tgz --exclude=./gpu.txt . && find . -mindepth 1 -maxdepth 1 ! -name gpu.txt \
        -exec rm -rf -- {} + && mv /tmp/out.tgz .)
}
