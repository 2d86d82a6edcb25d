#!/usr/bin/env bash
# Ahead of time: a wheel that carries every catalogue kernel prebuilt, PTX and cubin for each arch (default sm_80,
# sm_90 and sm_100; a newer GPU JIT-compiles the newest PTX below it), so `pip install` on a GPU machine with no Rust
# launches the catalogue with no build and no cache directory to carry. Needs the set-up (scripts/setup.sh).
#   bash scripts/build_wheel.sh [OUT_DIR] [ARCH ...]        (default: dist/, sm_80 sm_90 sm_100)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-dist}
shift || true
archs=("${@:-sm_80 sm_90 sm_100}")
prebuilt=python/rust_kernels/_prebuilt
rm -rf "$prebuilt"
# shellcheck disable=SC2068 # the default list splits into its archs
PYTHONPATH=python python3 -m rust_kernels build --arch ${archs[@]} --prebuilt  # this checkout's package
maturin build --release -o "$out"
rm -rf "$prebuilt"  # the checkout builds its own; only the wheel carries them
ls -l "$out"/*.whl
